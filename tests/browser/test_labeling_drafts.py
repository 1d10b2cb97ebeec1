"""Typed work survives (issue 44): a judgement in progress (choice, both bad, rationale, ratings,
a first wrong step) comes back after a reload, leaving with unsaved input asks first, a
submitted judgement leaves no draft behind, and the lease's time left is shown and counts
down, at 1440 and 390 px."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Judgement
from tests.browser.conftest import login
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
    page.locator("#judgement-form .step[data-side=left][data-index]").first.click()
    marked = page.locator("b[data-mark=left]").inner_text()
    assert marked != "–"

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

    # Submitted: stored as typed, and no draft is left to come back on the next comparison.
    page.keyboard.press("Control+Enter")
    _wait_for_next(page, first)
    judgement = Judgement.objects.get(assignment_id=first)
    assert judgement.both_bad and judgement.rationale == "The left one quotes its source."
    assert page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('arbiter-draft-')).length") == 0
    expect(page.locator("#draft-note")).to_be_hidden()
    assert not page.locator("#judgement-form input[name=choice]:checked").count()
    assert not page.js_errors
