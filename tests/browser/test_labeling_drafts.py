"""Typed work survives (issues 44 and 53): a judgement in progress (choice, both bad, rationale,
ratings, a first wrong step) is kept on the server and comes back after a reload, in another tab
that opened another campaign, after a reload while the campaign was paused, and in another
browser (another device); leaving while a change has not reached the server asks first; a
submitted judgement leaves no draft behind and sends no save that races it; the lease's time left is shown and counts down, at
1440 and 390 px. An annotator goes back to their last judgement (p), changes it, and one a
dataset snapshot holds is refused."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Campaign, Judgement, JudgementRevision
from annotate.services.datasets import snapshot_create
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DIMENSION = {"name": "helpfulness", "description": "", "scale": 5, "required": False}


def _campaign(n_tasks: int, dimensions: list[dict]):
    import io

    from annotate.services.imports import trajectories_import_stream
    from tests.samples import canonical, jsonl

    campaign = CampaignFactory(votes_per_comparison=1, dimensions=dimensions)
    lines = [
        canonical(task_id=f"task-{t}", prompt=f"Question {t}?", answer=f"answer {t}-{n}", n=n)
        for t in range(n_tasks)
        for n in range(2)
    ]
    trajectories_import_stream(stream=io.BytesIO(jsonl(*lines)), campaign=campaign)
    return campaign


def _wait_for_next(page, assignment_id):
    page.wait_for_function(
        "id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=assignment_id
    )


@pytest.mark.parametrize("width", [1440, 390])
def test_a_judgement_in_progress_survives_a_reload_and_leaving_asks_first(page, live_server, width):
    campaign = _campaign(n_tasks=2, dimensions=[DIMENSION])
    campaign.lease_seconds = 90
    campaign.save(update_fields=["lease_seconds"])
    UserFactory(username="drafter", roles=["annotator"])
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "drafter")
    url = f"{live_server.url}/annotate/campaigns/{campaign.id}/label/"
    page.goto(url)
    first = int(page.locator("#workbench").get_attribute("data-assignment"))

    # The lease: the time left, as a clock that counts down (never "0 min" for 90 s).
    clock = page.locator("#lease-left [data-lease-clock]")
    expect(clock).to_have_text(re.compile(r"^1:(2\d|30)$"))
    start = clock.inner_text()
    expect(clock).not_to_have_text(start, timeout=3000)

    # Work in progress: a choice, both bad, a rationale, a rating, a first wrong step.
    page.keyboard.press("2")
    page.keyboard.press("b")
    page.locator("textarea[name=rationale]").fill("The left one quotes its source.")
    page.locator("select[name=rating__helpfulness__left]").select_option("4")
    expect(page.locator("#draft-state")).to_have_text("Draft saved")
    # Offline, the last change cannot reach the server: it is kept in this browser, and leaving asks.
    page.context.set_offline(True)
    page.locator("#judgement-form .step[data-side=left][data-index]").first.click()
    marked = page.locator("b[data-mark=left]").inner_text()
    assert marked != "–"
    expect(page.locator("#draft-state")).to_contain_text("Offline: kept in this browser")

    # Leaving asks first (the browser's own "Leave site?" dialog); staying keeps everything.
    asked = []

    def stay(dialog):
        asked.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", stay)
    page.evaluate("window.location.href = '/annotate/campaigns/'")
    page.wait_for_timeout(500)
    assert asked == ["beforeunload"] and page.url == url
    page.remove_listener("dialog", stay)
    page.context.set_offline(False)

    # A reload (accepting to leave) brings the same comparison back with everything typed.
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    assert int(page.locator("#workbench").get_attribute("data-assignment")) == first
    expect(page.locator("#draft-note")).to_be_visible()
    assert page.locator("#judgement-form input[name=choice][value='2']").is_checked()
    assert page.locator("#judgement-form input[name=both_bad]").is_checked()
    assert page.locator("textarea[name=rationale]").input_value() == "The left one quotes its source."
    assert page.locator("select[name=rating__helpfulness__left]").input_value() == "4"
    assert page.locator("b[data-mark=left]").inner_text() == marked

    # Submitted straight after a change: stored as typed, with no draft save racing the submit
    # (one that lost was refused, 409), and no draft is left to come back on the next comparison.
    saves = []
    page.on(
        "request", lambda request: saves.append((request.url, request.post_data)) if request.method == "PUT" else None
    )
    page.locator("textarea[name=rationale]").fill("The left one quotes its source, page 2.")
    page.locator("textarea[name=rationale]").press("Control+Enter")
    _wait_for_next(page, first)
    page.wait_for_timeout(600)  # past the save's delay (400 ms): a save still scheduled would be sent by now
    judgement = Judgement.objects.get(assignment_id=first)
    assert judgement.both_bad and judgement.rationale == "The left one quotes its source, page 2."
    assert saves == [], saves
    assert page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('arbiter-draft-')).length") == 0
    expect(page.locator("#draft-note")).to_be_hidden()
    assert not page.locator("#judgement-form input[name=choice]:checked").count()
    assert not page.js_errors


def _label(page, live_server, campaign):
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    return int(page.locator("#workbench").get_attribute("data-assignment"))


def _type_a_draft(page):
    page.keyboard.press("4")
    page.locator("textarea[name=rationale]").fill("Right found the page; left guessed.")
    page.locator("#judgement-form .step[data-side=right][data-index]").first.click()
    expect(page.locator("#draft-state")).to_have_text("Draft saved")
    return page.locator("b[data-mark=right]").inner_text()


def _expect_the_draft(page, marked):
    expect(page.locator("#draft-note")).to_be_visible()
    assert page.locator("#judgement-form input[name=choice][value='4']").is_checked()
    assert page.locator("textarea[name=rationale]").input_value() == "Right found the page; left guessed."
    assert page.locator("b[data-mark=right]").inner_text() == marked


def test_a_draft_survives_another_tab_on_another_campaign_the_alignment_key_and_another_device(
    page, browser, live_server
):
    first, other = _campaign(n_tasks=1, dimensions=[]), _campaign(n_tasks=1, dimensions=[])
    UserFactory(username="drafter", roles=["annotator"])
    login(page, live_server, "drafter")
    mine = _label(page, live_server, first)
    marked = _type_a_draft(page)

    # `a` reloads the comparison in the other alignment: what was typed stays (as the help says).
    page.keyboard.press("a")
    expect(page.locator("[data-align-toggle]")).to_contain_text("Align by content")
    _expect_the_draft(page, marked)
    page.locator("#help").evaluate("d => d.showModal()")
    expect(page.locator("#help")).to_contain_text("what you chose and typed but did not submit is kept")
    page.keyboard.press("Escape")

    # A second tab on another campaign used to delete every other draft from this browser.
    tab = page.context.new_page()
    _label(tab, live_server, other)
    expect(tab.locator("#draft-note")).to_be_hidden()
    assert page.evaluate(f"localStorage.getItem('arbiter-draft-{mine}') !== null")
    tab.close()
    page.reload()
    assert int(page.locator("#workbench").get_attribute("data-assignment")) == mine
    _expect_the_draft(page, marked)
    screenshot(page, "labeling-draft-restored")

    # Another device: a browser with nothing stored gets the draft from the server.
    device = browser.new_context(viewport={"width": 390, "height": 900})
    phone = device.new_page()
    login(phone, live_server, "drafter")
    assert _label(phone, live_server, first) == mine
    _expect_the_draft(phone, marked)
    device.close()
    assert not page.js_errors


def test_a_draft_survives_a_reload_while_the_campaign_is_paused(page, live_server):
    campaign = _campaign(n_tasks=1, dimensions=[])
    UserFactory(username="drafter", roles=["annotator"])
    login(page, live_server, "drafter")
    mine = _label(page, live_server, campaign)
    marked = _type_a_draft(page)
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.PAUSED)
    page.reload()
    expect(page.locator("#campaign-not-active")).to_contain_text("This campaign is paused")
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ACTIVE)
    page.reload()
    assert int(page.locator("#workbench").get_attribute("data-assignment")) == mine
    _expect_the_draft(page, marked)
    assert not page.js_errors


def test_going_back_to_the_last_judgement_by_keyboard_and_a_frozen_one_is_refused(page, live_server):
    campaign = _campaign(n_tasks=2, dimensions=[])
    UserFactory(username="reviser", roles=["annotator"])
    login(page, live_server, "reviser")
    first = _label(page, live_server, campaign)
    expect(page.locator("[data-revise-last]")).to_have_count(0)  # nothing judged yet
    page.keyboard.press("2")
    page.keyboard.press("Control+Enter")
    _wait_for_next(page, first)
    judgement = Judgement.objects.select_related("assignment").get(assignment_id=first)
    stored = judgement.choice

    page.keyboard.press("p")
    page.wait_for_url(f"**/annotate/judgements/{judgement.pk}/revise/")
    assert page.locator("#judgement-form input[name=choice][value='2']").is_checked()
    page.keyboard.press("5")
    page.keyboard.press("b")
    page.locator("textarea[name=rationale]").fill("Right was better after all.")
    page.locator("textarea[name=rationale]").press("Control+Enter")
    page.wait_for_url(f"**/annotate/campaigns/{campaign.id}/label/")
    expect(page.locator(".messages")).to_contain_text("Your judgement was revised: it now says “Right much better”")
    judgement.refresh_from_db()
    assert judgement.choice == (5 if judgement.assignment.left_is_a else 1) and judgement.both_bad
    [change] = JudgementRevision.objects.filter(judgement=judgement)
    assert change.before["choice"] == stored and change.after["choice"] == judgement.choice
    screenshot(page, "labeling-revised")

    snapshot_create(name="frozen", campaigns=[campaign], test_fraction=0.0)
    page.keyboard.press("p")
    page.wait_for_url(f"**/annotate/judgements/{judgement.pk}/revise/")
    expect(page.locator("#revise-refused")).to_contain_text("can no longer be revised")
    expect(page.locator("#judgement-form button[type=submit]")).to_be_disabled()
    expect(page.locator("#revision-history")).to_contain_text("→ “Right much better, both bad”")
    screenshot(page, "labeling-revise-refused")
    assert not page.js_errors
