"""A labeling lead adds a chat judge, runs it on a campaign (a real worker, an OpenAI-compatible
server on 127.0.0.1), reads how far to trust it on the quality page and orders the queue
disagreement-first; an annotator labels with the judge's verdict filled in."""

import pytest
from playwright.sync_api import expect

from annotate.models import Comparison, Judge, JudgeVote
from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from tests.fake_openai import ok, start_fake_openai
from tests.helpers import WORKER_JOB_MS, annotators, label_all
from tests.training.judge_fixtures import chat_judge_votes, rubric_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "sk-browser-test-key"
VERDICT = {
    "rationale": "A quotes the page.",
    "verdict": "A better",
    "both_bad": False,
    "ratings": {},
    "first_wrong_step_a": None,
    "first_wrong_step_b": None,
}


@pytest.fixture
def server(request):
    fake, stop = start_fake_openai()
    fake.default = ok(VERDICT)
    request.addfinalizer(stop)
    return fake


@pytest.mark.worker
def test_a_lead_adds_a_chat_judge_runs_it_reads_the_agreement_and_orders_the_queue(
    page, live_server, celery_worker_process, server
):
    UserFactory(username="lead", roles=["admin"])
    campaign = rubric_campaign(n=6, k=3)
    label_all(campaign, annotators(2), choice=2)  # two people's votes on each; one slot left
    login(page, live_server, "lead")

    page.click("nav a:has-text('Judges')")
    page.fill("#id_name", "gpt-like")
    page.select_option("#id_kind", "chat")
    expect(page.locator("fieldset[data-kind=chat]")).to_be_visible()
    expect(page.locator("fieldset[data-kind=reward_model]")).to_be_hidden()
    page.fill("#id_base_url", server.url)
    page.fill("#id_model", "judge-1")
    page.fill("#id_api_key", KEY)
    page.fill("#id_requests_per_minute", "0")
    page.click("button:has-text('Add the judge')")
    expect(page.locator("#key-source")).to_contain_text("stored")
    assert KEY not in page.content()

    # Tried on one comparison first: one call, one vote, before a whole run is paid for.
    judge_page = page.url
    page.click("#try-judge")
    assert page.locator("input[name=max_comparisons]").input_value() == "1"
    page.select_option("select[name=campaign_id]", str(campaign.pk))
    page.click("button:has-text('Launch')")
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=WORKER_JOB_MS)
    assert len(server.requests) == 1 and JudgeVote.objects.filter(probe="first").count() == 1

    page.goto(judge_page)
    page.click("#run-judge")
    page.select_option("select[name=campaign_id]", str(campaign.pk))
    page.fill("input[name=swapped_share]", "1")
    page.click("button:has-text('Launch')")
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=WORKER_JOB_MS)
    judge = Judge.objects.get(name="gpt-like")
    assert JudgeVote.objects.filter(judge=judge, probe="first").count() == 6
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"

    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/quality/")
    table = page.locator("table.judge-agreement")
    expect(table).to_be_visible()
    assert "%" in table.locator("tbody tr").first.inner_text()  # accuracy against people, with its interval
    assert page.locator("#judges svg.chart circle").count() >= 2  # the judge, and people's ceiling
    assert "100.0%" in page.locator(".flip-rate").inner_text()  # always "A better": it follows the position
    screenshot(page, "judges-quality")

    page.select_option("#ordering", "disagreement_first")
    page.click("button:has-text('Order the queue')")
    expect(page.locator(".messages")).to_contain_text("Ordered 6 open comparisons")
    assert Comparison.objects.filter(campaign=campaign, priority__gt=0).count() == 6
    assert not page.js_errors


def test_an_annotator_labels_with_the_judges_verdict_filled_in(page, live_server):
    UserFactory(username="lead", roles=["admin"])
    UserFactory(username="ann", roles=["annotator"])
    campaign = rubric_campaign(n=2, k=1)
    judge = chat_judge_votes(campaign)

    login(page, live_server, "lead")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/edit/")
    page.select_option("select[name=judge_mode]", "prefilled")
    page.select_option("select[name=shown_judge]", str(judge.pk))
    page.click("button:has-text('Save')")
    expect(page.locator(".messages")).to_contain_text("Settings saved")
    page.context.clear_cookies()

    login(page, live_server, "ann")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.pk}/label/")
    expect(page.locator("#judge-suggestion")).to_contain_text(judge.name)
    checked = page.locator("input[name=choice]:checked")
    assert checked.count() == 1 and checked.get_attribute("value") in ("1", "5")  # the judge said "much better"
    page.keyboard.press("Enter")
    expect(page.locator("#judge-after")).to_contain_text("as you did")
    screenshot(page, "judges-prefilled")
    assert not page.js_errors
