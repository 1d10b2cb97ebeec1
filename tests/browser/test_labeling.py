"""An annotator labels with the keyboard alone; marks a first wrong step; script payloads stay text."""
import io

import pytest

from annotate.models import Assignment, Judgement
from annotate.services.imports import trajectories_import_stream
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory
from tests.samples import canonical, jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _campaign(n_tasks=3, per_task=2, k=1, dimensions=(), payload=False):
    campaign = CampaignFactory(votes_per_comparison=k, dimensions=list(dimensions),
                               guidelines="## Be fair\nPrefer **supported** answers.")
    lines = []
    for t in range(n_tasks):
        for n in range(per_task):
            answer = XSS if payload and n == 0 else f"answer {t}-{n}"
            lines.append(canonical(task_id=f"task-{t}", prompt=f"Question {t}?", answer=answer, n=n))
    trajectories_import_stream(stream=io.BytesIO(jsonl(*lines)), campaign=campaign)
    return campaign




def test_keyboard_only_session_records_judgements_with_the_right_side_mapping(page, live_server):
    campaign = _campaign(n_tasks=3)
    ann = UserFactory(username="kb", roles=["annotator"])
    login(page, live_server, "kb")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    pressed = ["1", "4", "3"]
    for i, key in enumerate(pressed):
        assignment_id = int(page.locator("#workbench").get_attribute("data-assignment"))
        if i == 0:
            screenshot(page, "comparison-screen")
        page.keyboard.press(key)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=assignment_id
        )
        assignment = Assignment.objects.get(pk=assignment_id)
        judgement = Judgement.objects.get(assignment=assignment)
        screen = int(key)
        expected = screen if assignment.left_is_a else 6 - screen
        assert judgement.choice == expected, (key, assignment.left_is_a, judgement.choice)
        assert judgement.annotator == ann and judgement.seconds >= 0
    page.wait_for_selector("text=Nothing to label right now")
    assert Judgement.objects.count() == 3
    assert "You judged 3" in page.locator("#counter").inner_text()
    assert not page.js_errors


def test_help_skip_and_first_wrong_step(page, live_server):
    campaign = _campaign(n_tasks=2, dimensions=["correctness"])
    UserFactory(username="mk", roles=["annotator"])
    login(page, live_server, "mk")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    assert page.locator("#help h2", has_text="Be fair").count() == 1
    page.keyboard.press("Escape")
    assert not page.locator("#help").is_visible()

    first = int(page.locator("#workbench").get_attribute("data-assignment"))
    page.keyboard.press("s")
    page.keyboard.press("Enter")
    page.wait_for_function("id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=first)
    assert Assignment.objects.get(pk=first).status == "skipped"

    second = int(page.locator("#workbench").get_attribute("data-assignment"))
    page.click(".step[data-side=right][data-index='2'] .step-index")
    assert page.locator(".step[data-side=right][data-index='2']").evaluate("el => el.classList.contains('marked-wrong')")
    screenshot(page, "first-wrong-step")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    assignment = Assignment.objects.get(pk=second)
    judgement = Judgement.objects.get(assignment=assignment)
    marked = judgement.first_wrong_step_b if assignment.left_is_a else judgement.first_wrong_step_a
    other = judgement.first_wrong_step_a if assignment.left_is_a else judgement.first_wrong_step_b
    assert (marked, other) == (2, None)
    assert not page.js_errors


def test_script_payload_in_a_trajectory_renders_as_text_and_does_not_run(page, live_server):
    campaign = _campaign(n_tasks=1, payload=True)
    UserFactory(username="xs", roles=["annotator"])
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, live_server, "xs")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assert page.locator(".answer", has_text="<script>window.__pwned=2</script>").count() == 1
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#workbench img").count() == 0
    screenshot(page, "script-payload-as-text")
    assert dialogs == []
