"""An admin watches a run live: the page updates itself while the run works and stops when it ends."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from webapp.models import Run, RunMetric

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_run_page_follows_a_run_to_its_end(page, live_server):
    admin = UserFactory(username="boss", roles=["admin"])
    run = Run.objects.create(
        kind="reward_model",
        name="watch me",
        status="running",
        attempt=1,
        created_by=admin,
        progress=0.2,
        device="CPU (2 threads)",
        worker="vm",
        heartbeat_at=timezone.now(),
        config={"snapshot_id": 1, "epochs": 3.0},
    )
    RunMetric.objects.create(run=run, step=1, values={"train/loss": 0.9})
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("#run-status").inner_text() == "running"
    assert page.get_by_role("button", name="Cancel").is_visible()
    # The worker reports: more progress, a second metric point, then success.
    for step, loss in ((2, 0.6), (3, 0.4)):
        RunMetric.objects.create(run=run, step=step, values={"train/loss": loss})
    Run.objects.filter(pk=run.pk).update(
        progress=1.0,
        status="succeeded",
        summary={"accuracy": 0.81},
        heartbeat_at=timezone.now(),
        finished_at=timezone.now(),
    )
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=10_000)
    assert page.locator("svg.chart polyline").count() == 1
    assert "81%" in page.locator("#result").inner_text()  # a share, written as a percentage
    assert page.locator("#run-live[hx-trigger]").count() == 0  # polling stopped
    assert page.get_by_role("button", name="Cancel").count() == 0
    screenshot(page, "run-detail")
    assert not page.js_errors


def test_the_run_page_has_a_chart_per_metric_and_downloads_artifacts(page, live_server):
    from tests.helpers import TRAIN_METRICS, make_run

    admin = UserFactory(username="boss", roles=["admin"])
    run = make_run(admin)
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    metrics = sorted(
        {name for values in RunMetric.objects.filter(run=run).values_list("values", flat=True) for name in values}
    )
    assert len(metrics) == len(TRAIN_METRICS) + 1
    charts = page.locator("#curves svg.chart")
    assert charts.count() == len(metrics)
    assert sorted(charts.nth(i).get_attribute("data-metric") for i in range(charts.count())) == metrics
    assert page.locator("#curves h3.namespace").all_inner_texts() == ["eval/", "train/"]
    # Each chart has its own axis: num_tokens in the hundred thousands, loss below 2.
    tokens = page.locator('svg[data-metric="train/num_tokens"]').text_content()
    loss = page.locator('svg[data-metric="train/loss"]').text_content()
    assert "200,000" in tokens and "200,000" not in loss and "1.5" in loss
    # The one-point eval chart shows its point, with its value on hover.
    point = page.locator('svg[data-metric="eval/accuracy"] circle')
    assert point.count() == 1 and point.bounding_box()["width"] > 3
    assert point.locator("title").text_content() == "eval/accuracy: 81.2% at step 30"
    assert "81.2%" in page.locator("#result").inner_text()
    # Artifacts are links; the file downloads; no server path on the page.
    with page.expect_download() as download:
        page.locator("#artifacts a", has_text="config.json").click()
    assert download.value.suggested_filename == f"run{run.pk}-config.json"
    assert open(download.value.path()).read() == '{"hidden": 128}'
    assert (
        "/var/" not in page.locator("main").inner_text()
        and "Kept outside this run" in page.locator("#artifacts").inner_text()
    )
    screenshot(page, "run-charts")
    assert not page.js_errors


def test_the_launch_form_has_pickers_and_reports_every_problem_at_once(page, live_server, tmp_path):
    from annotate.models import Policy

    (tmp_path / "config.json").write_text("{}")
    for name in ("alpha-bc", "beta-ppo", "gamma-ppo", "delta-rloo"):
        Policy.objects.create(name=name, model_dir=str(tmp_path))
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/runs/")
    page.get_by_role("link", name="Evaluation (before/after)").first.click()
    page.wait_for_url("**/runs/new/evaluation/")
    # Pickers, the rows it reads first.
    first = page.locator(".launch-form .field").first
    assert first.locator("select[name=baseline_policy_id]").count() == 1
    assert page.locator("select[name=rl_run_id]").count() == 1 and page.locator("input[name=policy_ids]").count() == 4
    # Several policies: type to filter the list, tick with a click (no Ctrl).
    page.get_by_label("Filter Policies").fill("ppo")
    visible = page.locator("#field-policy_ids label.check:visible")
    assert visible.count() == 2
    visible.filter(has_text="gamma-ppo").click()
    assert "1 selected" in page.locator("#field-policy_ids .pick-count").inner_text()
    # The switch sits beside its label, on its line.
    box, label = (page.locator(f"#field-greedy {s}").bounding_box() for s in ("input", "span"))
    assert (
        box["x"] + box["width"] <= label["x"]
        and abs((box["y"] + box["height"] / 2) - (label["y"] + label["height"] / 2)) < 8
    )
    # Three wrong fields: all three reported after one submit.
    page.fill("input[name=samples]", "0")
    page.fill("input[name=temperature]", "-1")
    page.fill("input[name=name]", "")
    page.get_by_role("button", name="Launch").click()
    summary = page.locator("#error-summary")
    summary.wait_for()
    text = summary.inner_text()
    assert (
        "Samples: between 1 and 64" in text
        and "Temperature: above 0" in text
        and "Name: give the evaluation a name" in text
    )
    assert page.locator("#field-samples .error").count() == 1 and page.locator("#field-temperature .error").count() == 1
    assert page.locator("input[name=policy_ids]:checked").count() == 1  # the ticked policy stays ticked
    screenshot(page, "launch-form-errors")
    assert not page.js_errors
