"""An annotator corrects a side from the labeling screen (issue 33): with the keyboard, the
answer first, then a tool call with arguments that fail their schema (refused, with the field
named) and fixed (stored, played in the encyclopedia); on a phone-sized screen too."""

import pytest
from playwright.sync_api import expect

from annotate.models import Correction, Judgement
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, UserFactory
from training.simulation import scripted_trajectories_generate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def campaign():
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=2, samples_per_agent=2, seed=3)
    return campaign


@pytest.mark.parametrize("width", [1440, 390])
def test_an_annotator_corrects_an_answer_and_a_tool_call(page, live_server, campaign, width):
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
    expect(page.locator("#correction-stored")).to_contain_text("played in the environment")
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
    assert not Judgement.objects.exists()
    assert Correction.objects.filter(kind="tool_call", replayed=True).count() == 1
    screenshot(page, f"correction-{width}")
    page.keyboard.press("Escape")  # the first leaves the text field,
    page.keyboard.press("Escape")  # the second closes the form
    expect(form).to_be_hidden()
    assert not page.js_errors
