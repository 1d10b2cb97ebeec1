"""An admin watches a run live: the page updates itself while the run works and stops when it ends."""
import pytest
from playwright.sync_api import expect
from django.utils import timezone

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from webapp.models import Run, RunMetric

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_run_page_follows_a_run_to_its_end(page, live_server):
    admin = UserFactory(username="boss", roles=["admin"])
    run = Run.objects.create(kind="reward_model", name="watch me", status="running", attempt=1, created_by=admin,
                             progress=0.2, device="CPU (2 threads)", worker="vm", heartbeat_at=timezone.now(),
                             config={"snapshot_id": 1, "epochs": 3.0})
    RunMetric.objects.create(run=run, step=1, values={"train/loss": 0.9})
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("#run-status").inner_text() == "running"
    assert page.get_by_role("button", name="Cancel").is_visible()
    # The worker reports: more progress, a second metric point, then success.
    for step, loss in ((2, 0.6), (3, 0.4)):
        RunMetric.objects.create(run=run, step=step, values={"train/loss": loss})
    Run.objects.filter(pk=run.pk).update(progress=1.0, status="succeeded", summary={"accuracy": 0.81},
                                         heartbeat_at=timezone.now(), finished_at=timezone.now())
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=10_000)
    assert page.locator("svg.chart polyline").count() == 1 and "0.81" in page.locator("#run-live").inner_text()
    assert page.locator("#run-live[hx-trigger]").count() == 0  # polling stopped
    assert page.get_by_role("button", name="Cancel").count() == 0
    screenshot(page, "run-detail")
    assert not page.js_errors
