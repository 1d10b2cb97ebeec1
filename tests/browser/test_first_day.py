"""A newcomer's first day (issue 27), in Chromium: what asks before it destroys, what warns,
and the layouts that used to scroll sideways, hide the verdict or show empty folds."""

import pytest
from django.utils import timezone

from annotate.models import Comparison
from tests.browser.conftest import login
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
from webapp.models import ApiToken, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PHONE = {"width": 390, "height": 844}


def _console_errors(page) -> list[str]:
    """Console errors (htmx logs its own there) and uncaught exceptions of the page."""
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def test_cancelling_a_run_and_revoking_a_token_ask_first(page, live_server):
    admin = UserFactory(username="boss", roles=["admin"])
    run = Run.objects.create(
        kind="bc",
        name="long one",
        status="running",
        attempt=1,
        created_by=admin,
        progress=0.3,
        heartbeat_at=timezone.now(),
    )
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    questions: list[str] = []

    def answer(dialog, accept: bool):
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.get_by_role("button", name="Cancel").click()
    page.wait_for_timeout(300)
    assert "Cancel run" in questions[-1] and not Run.objects.get(pk=run.pk).cancel_requested
    page.once("dialog", lambda d: answer(d, True))
    page.get_by_role("button", name="Cancel").click()
    page.wait_for_selector("text=Cancel requested")
    assert Run.objects.get(pk=run.pk).cancel_requested

    page.goto(f"{live_server.url}/account/tokens/")
    page.fill("input[name=name]", "laptop")
    page.get_by_role("button", name="Create a token").click()
    page.wait_for_selector("td:has-text('laptop')")
    page.once("dialog", lambda d: answer(d, False))
    page.get_by_role("button", name="Revoke").click()
    page.wait_for_timeout(300)
    assert "Revoke the token laptop" in questions[-1] and ApiToken.objects.count() == 1
    page.once("dialog", lambda d: answer(d, True))
    page.get_by_role("button", name="Revoke").click()
    page.wait_for_selector("text=Token revoked")
    assert not page.js_errors


def test_a_user_made_without_a_role_comes_with_a_warning(page, live_server):
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/team/users/")
    page.fill("input[name=username]", "norole")
    page.check("input[name=how][value=password]")
    page.get_by_role("button", name="Add the user").click()
    page.wait_for_selector(".msg-warning")
    assert "norole has no role" in page.locator(".msg-warning").inner_text()


def test_the_campaign_form_fits_a_phone_with_dimensions(browser, live_server):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/annotate/campaigns/new/")
    for _ in range(2):
        page.click("#add-dimension")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    box = page.locator("#dimension-rows .dimension-row:first-child input[name=dimension_name]").bounding_box()
    assert box["width"] >= 120 and box["height"] >= 44  # it was 48 x 21
    context.close()


def _prompted_campaign(prompt: str, *, left_setup=None, dimensions=()):
    campaign = CampaignFactory(votes_per_comparison=1, dimensions=list(dimensions))
    task = TaskFactory(prompt=prompt)
    a = TrajectoryFactory(task=task, metadata=left_setup or {})
    b = TrajectoryFactory(task=task)
    Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return campaign


@pytest.mark.parametrize("viewport,length", [({"width": 1440, "height": 900}, 3000), (PHONE, 1000)])
def test_a_long_prompt_is_folded_and_the_verdict_is_in_view(browser, live_server, viewport, length):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    campaign = _prompted_campaign(("A long question about the archives. " * 200)[:length])
    UserFactory(username="ann", roles=["annotator"])
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    bar = page.locator("#verdict-bar").bounding_box()
    assert bar["y"] + bar["height"] <= viewport["height"] + 1, "the verdict bar is on screen when the pair loads"
    page.click("text=Show the whole task")
    assert str(length) in page.locator("details.prompt-full summary").inner_text()
    assert page.locator("details.prompt-full[open] .prompt").inner_text().startswith("A long question")
    context.close()


def test_one_sided_setup_thumb_targets_and_no_console_errors_on_a_phone(browser, live_server):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    errors = _console_errors(page)
    campaign = _prompted_campaign(
        "Short?",
        left_setup={"system_prompt": "You are careful."},
        dimensions=[{"name": "correctness", "scale": 5, "description": "", "required": False}],
    )
    UserFactory(username="ann", roles=["annotator"])
    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    setups = page.locator("[data-agent-setup]")
    texts = [setups.nth(i).inner_text() for i in range(setups.count())]
    assert any("no system prompt or tools recorded" in t for t in texts)
    assert page.locator("details.agent-setup").count() == 1  # only the side that has one folds
    for selector in ("table.ratings select", "label.wrong-mark"):
        box = page.locator(selector).first.bounding_box()
        assert box["height"] >= 44 and box["width"] >= 44, (selector, box)
    page.keyboard.press("a")  # align by index, then submit: htmx finds its submit button every time
    page.wait_for_selector("text=Aligned by index")
    page.locator("label.scale-point").nth(2).click()
    page.locator("#verdict-bar button[type=submit]").click()
    page.wait_for_selector("text=Nothing to label right now")
    assert not errors
    context.close()
