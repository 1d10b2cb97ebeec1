"""An annotator corrects a side from the labeling screen (issue 33): with the keyboard, the
answer first, then a tool call with arguments that fail their schema (refused, with the field
named) and fixed (stored, played in the encyclopedia by a real Celery worker, the web process
only queueing it, while the screen says so); on a phone-sized screen too."""

import json

import pytest
from playwright.sync_api import expect

from annotate.models import Correction, Judgement
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory
from tests.helpers import WORKER_JOB_MS
from training.simulation import scripted_trajectories_generate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def campaign():
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=2, samples_per_agent=2, seed=3)
    return campaign


@pytest.mark.parametrize("width", [1440, 390])
def test_an_annotator_corrects_an_answer_and_a_tool_call(page, live_server, campaign, width, celery_worker_process):
    UserFactory(username="ann", roles=["annotator"])
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/label/")
    page.keyboard.press("x")
    form = page.locator("#correction-form")
    expect(form).to_be_visible()
    expect(form.locator(".correction-calls")).to_be_hidden()  # the answer is the default fix
    prefilled = form.locator("textarea[name=answer]").input_value()  # the side's own answer, to edit
    form.locator("textarea[name=answer]").fill("Ilse Marrow")
    form.locator("textarea[name=answer]").press("Control+Enter")
    stored = page.locator("#correction-stored")
    expect(stored).to_contain_text("as edited; being played in encyclopedia on a worker")
    # The screen asks until the worker has played it.
    expect(stored).to_contain_text("played in the environment", timeout=WORKER_JOB_MS)
    expect(stored).to_have_attribute("data-replay", "done")
    fix = Correction.objects.get()
    assert prefilled == fix.original.answer and prefilled
    assert fix.kind == "answer" and fix.replayed and fix.corrected.answer == "Ilse Marrow"

    form.locator("input[name=kind][value=tool_call]").check()
    expect(form.locator(".correction-calls")).to_be_visible()
    step = next(i for i, s in enumerate(fix.original.steps) if s["kind"] == "action" and s["tool"] != "invalid")
    form.locator("input[name=step]").fill(str(step))
    form.locator("input[name=tool]").fill("search")
    form.locator("textarea[name=arguments]").fill('{"query": 5}')
    form.locator("button:has-text('Store the correction')").click()
    refused = page.locator("#correction-refused")
    expect(refused).to_contain_text("calls[0].arguments.query")
    # The refusal is where the person looks, and the keyboard stays in the correction form:
    # Ctrl+Enter, the natural retry, retries the correction and never submits the judgement.
    box, height = refused.bounding_box(), page.viewport_size["height"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= height + 1, box  # (+1: sub-pixel rounding)
    assert page.evaluate("document.getElementById('correction-form').contains(document.activeElement)")
    page.keyboard.press("Control+Enter")
    expect(refused).to_contain_text("calls[0].arguments.query")
    assert not Judgement.objects.exists() and form.locator("textarea[name=arguments]").input_value() == '{"query": 5}'
    form.locator("textarea[name=arguments]").fill('{"query": "Veloran Glassworks"}')
    page.keyboard.press("Control+Enter")
    expect(page.locator("#correction-stored")).to_contain_text(f"#{fix.pk + 1}")
    expect(page.locator("#correction-stored")).to_contain_text("played in the environment", timeout=WORKER_JOB_MS)
    assert not Judgement.objects.exists()
    assert Correction.objects.filter(kind="tool_call", replayed=True).count() == 1
    screenshot(page, f"correction-{width}")
    page.keyboard.press("Escape")  # the first leaves the text field,
    page.keyboard.press("Escape")  # the second closes the form
    expect(form).to_be_hidden()
    assert not page.js_errors


@pytest.mark.parametrize("width", [1440, 390])
def test_a_correction_starts_from_the_original_call_and_may_add_a_call_before_the_answer(
    page, live_server, campaign, width, celery_worker_process
):
    """Issue 44: `x` from a marked call fills in that call (unchanged, it is refused as a no-op
    with the reason); from the answer, calls typed there go before it (a missing `open`)."""
    UserFactory(username="ann", roles=["annotator"])
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/label/")
    starts = page.evaluate("JSON.parse(document.getElementById('correction-form').dataset.correctionSteps)")["left"]
    answer_at = next(int(i) for i, s in starts.items() if s["kind"] == "answer")
    last_call = max(int(i) for i, s in starts.items() if s["kind"] == "action")
    page.locator(f'#judgement-form .step[data-side="left"][data-index="{last_call}"]').first.click()
    page.keyboard.press("x")
    form = page.locator("#correction-form")
    expect(form.locator(".correction-calls")).to_be_visible()  # a marked call: replace it
    assert form.locator("input[name=step]").input_value() == str(last_call)
    assert form.locator("input[name=tool]").input_value() == starts[str(last_call)]["tool"]
    assert json.loads(form.locator("textarea[name=arguments]").input_value()) == starts[str(last_call)]["arguments"]
    expect(form.locator("[data-start-note]")).to_contain_text(f"a call to {starts[str(last_call)]['tool']}")
    page.keyboard.press("Control+Enter")  # nothing changed: the same call and the same answer
    expect(page.locator("#correction-refused")).to_contain_text("the same as the original")
    assert not Correction.objects.exists()

    # From the answer: the call row empties (it was only prefilled) and the new call goes before it.
    form.locator("input[name=step]").fill(str(answer_at))
    expect(form.locator("[data-start-note]")).to_contain_text("go before it")
    assert form.locator("input[name=tool]").input_value() == ""
    form.locator("input[name=tool]").fill("find")
    form.locator("textarea[name=arguments]").fill('{"text": "born"}')
    page.keyboard.press("Control+Enter")
    expect(page.locator("#correction-stored")).to_contain_text("played in the environment", timeout=WORKER_JOB_MS)
    fix = Correction.objects.get()
    assert fix.kind == "tool_call" and fix.step == answer_at and fix.replayed
    assert fix.corrected.steps[answer_at + 1]["kind"] == "observation"  # the encyclopedia's own answer
    corrected = fix.corrected.steps
    assert corrected[:answer_at] == fix.original.steps[:answer_at]
    assert corrected[answer_at]["tool"] == "find" and corrected[-1]["kind"] == "answer"
    assert fix.corrected.answer == fix.original.answer
    screenshot(page, f"correction-before-answer-{width}")
    assert not page.js_errors


def test_a_correction_over_its_body_limit_is_refused_where_the_person_looks_and_keeps_the_text(
    page, live_server, campaign, settings
):
    """A body over its route's limit is refused before it is read (a 413 htmx swaps nowhere):
    the page says why beside the form, and the typed answer stays (issue 53)."""
    settings.CORRECTION_MAX_BODY_BYTES = 2_000
    UserFactory(username="ann", roles=["annotator"])
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/label/")
    page.keyboard.press("x")
    answer = page.locator("#correction-form textarea[name=answer]")
    long_answer = "Ilse Marrow " * 400  # about 4.8 kB, over the 2 kB limit
    answer.fill(long_answer)
    answer.press("Control+Enter")
    refused = page.locator("#correction-form + .request-refused")
    expect(refused).to_contain_text("at most 2,000 bytes (CORRECTION_MAX_BODY_BYTES)")
    expect(refused).to_contain_text("what you typed is still here")
    assert answer.input_value() == long_answer and not Correction.objects.exists()
    settings.CORRECTION_MAX_BODY_BYTES = 1_000_000
    answer.fill("Ilse Marrow")
    answer.press("Control+Enter")
    expect(page.locator("#correction-stored")).to_be_visible()
    expect(refused).to_have_count(0)  # a request that went through takes the refusal away
    screenshot(page, "correction-over-its-limit")
    assert not page.js_errors
