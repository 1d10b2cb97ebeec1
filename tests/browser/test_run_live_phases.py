"""An admin watching a run sees the phase its worker is in within seconds, and a bar that never
goes back (issue 53: a PPO run showed "0.0% Starting ..." through its first two-minute
evaluation, and the default policy's bar went from 99% back to 91%).

The run executes for real (`run_execute`, its reporter and heartbeat) in a thread of the test
process; its kind announces a phase and then goes silent, as the dev evaluation does.
"""

import threading
from dataclasses import dataclass, field

import pytest
from django.db import connection
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from webapp.compute import pick_compute
from webapp.models import Run
from webapp.runs.kinds import RunKind, register
from webapp.runs.services import run_execute, run_launch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
GO_ON = [threading.Event(), threading.Event()]


@dataclass
class SilentConfig:
    wait_seconds: float = field(default=60.0, metadata={"help": "the longest a silent step waits for the test"})


def _silent(*, run, config, reporter, compute, resume_from):
    reporter.progress(0.3, "warming up")
    reporter.log("Judging the start on 8 dev tasks (1 sampled each) ...")
    reporter.progress(0.3, "Judging the start on 8 dev tasks (1 sampled each) ...")
    GO_ON[0].wait(config.wait_seconds)  # the long silent step
    reporter.progress(0.2, "Iteration 1 of 3: playing 64 episodes ...")  # a schedule that grew: 0.2 < 0.3
    GO_ON[1].wait(config.wait_seconds)
    return {}


register(
    RunKind(name="silent", label="Silent", description="a silent step", config_class=SilentConfig, execute=_silent)
)


def test_the_run_page_shows_the_workers_phase_within_seconds_and_never_a_bar_going_back(page, live_server):
    admin = UserFactory(username="boss", roles=["admin"])
    run = run_launch(kind="silent", config={}, user=admin, enqueue=False)

    def work():
        try:
            run_execute(run_id=run.pk, attempt=1)
        finally:
            connection.close()

    pick_compute()  # torch loaded once, as in a worker process that has run before (seconds on a busy machine)
    worker = threading.Thread(target=work, daemon=True)
    try:
        login(page, live_server, "boss")
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        worker.start()
        shown = page.locator("#run-progress")
        # The page polls every 2 s: the phase the worker began is there within a few seconds, while
        # the worker says nothing more.
        expect(shown).to_contain_text("Judging the start on 8 dev tasks", timeout=6_000)
        expect(page.locator("pre.log")).to_contain_text("Judging the start on 8 dev tasks", timeout=1_000)
        assert shown.inner_text().startswith("30.0%")
        screenshot(page, "run-live-phase")
        GO_ON[0].set()
        expect(shown).to_contain_text("Iteration 1 of 3: playing 64 episodes", timeout=6_000)
        assert shown.inner_text().startswith("30.0%"), shown.inner_text()  # not 20%: the bar holds
        assert page.locator("progress.run-progress").get_attribute("value") == "0.3000"
        GO_ON[1].set()
        expect(page.locator("#run-status")).to_have_text("succeeded", timeout=10_000)
        assert not page.js_errors
    finally:
        for event in GO_ON:
            event.set()
        if worker.is_alive() or worker.ident:
            worker.join(timeout=30)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
