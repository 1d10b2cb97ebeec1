"""A run looks alive (issue 53): the page shows the phase the worker is in within seconds, its
progress never goes backwards, a failed run is never shown at 100% and shows no traceback, and
its device says the threads its config uses.

Kinds registered here drive the real run machinery (`run_execute`, `RunReporter`) in-process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
import torch
from django.db import transaction
from django.utils import timezone

from tests.helpers import as_a_browser_posts
from training.run_kinds.improve import RLRunConfig
from webapp.compute import Compute, compute_for
from webapp.models import Run
from webapp.runs.kinds import RunKind, register
from webapp.runs.services import RunReporter, run_execute, run_launch

SEEN: dict = {}


@dataclass
class PhasesConfig:
    silent_seconds: float = field(default=3.0, metadata={"help": "how long the silent step lasts"})


def _phases(*, run, config, reporter, compute, resume_from):
    """The PPO pattern that looked dead: a log line, then at once the phase of a long step that
    reports nothing until it ends (judging the start on dev)."""
    reporter.progress(0.2, "warming up")
    reporter.log("Judging the start on 8 dev tasks ...")
    reporter.progress(0.2, "Judging the start on 8 dev tasks ...")
    began, shown = time.monotonic(), None
    while time.monotonic() - began < config.silent_seconds:  # the step: the reporter is not called
        row = Run.objects.only("progress_message", "log").get(pk=run.pk)
        if shown is None and row.progress_message.startswith("Judging the start") and "Judging" in row.log:
            shown = time.monotonic() - began
        time.sleep(0.05)
    SEEN["shown_after"] = shown
    return {}


register(
    RunKind(name="phases", label="Phases", description="a silent step", config_class=PhasesConfig, execute=_phases)
)


@dataclass
class AtomicConfig:
    reports: int = field(default=40, metadata={"help": "reports made inside one transaction"})


def _atomic(*, run, config, reporter, compute, resume_from):
    """Reports from inside a transaction, which holds the run's row: the reporter's writer thread
    waits for it, and the training thread must never wait for the writer."""
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(summary={"held": True})  # the row is locked from here
        for i in range(config.reports):
            reporter.progress(i / config.reports, f"step {i}")
            reporter.log(f"line {i}")
            time.sleep(0.05)
    return {}


register(
    RunKind(
        name="atomic",
        label="Atomic",
        description="reports in a transaction",
        config_class=AtomicConfig,
        execute=_atomic,
    )
)


@dataclass
class FailConfig:
    progress: float = field(default=1.0, metadata={"help": "progress reached before it fails"})


def _fail(*, run, config, reporter, compute, resume_from):
    reporter.progress(config.progress, "every answer asked")
    raise ValueError("the endpoint refused every call\nTraceback-looking second line")


register(RunKind(name="fails", label="Fails", description="fails late", config_class=FailConfig, execute=_fail))


@dataclass
class ThreadedConfig:
    threads: int = field(default=1, metadata={"help": "torch threads"})


def _threaded(*, run, config, reporter, compute, resume_from):
    SEEN["compute_name"] = compute.name
    return {}


register(
    RunKind(name="threaded", label="Threaded", description="threads", config_class=ThreadedConfig, execute=_threaded)
)


@pytest.mark.django_db(transaction=True)  # the reporter's writer thread sees the run, as on a worker
def test_a_phase_begun_just_after_a_write_shows_on_the_run_within_a_second(admin_user):
    run = run_launch(kind="phases", config={"silent_seconds": 3}, user=admin_user, enqueue=False)
    run_execute(run_id=run.pk, attempt=1)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    assert SEEN["shown_after"] is not None and SEEN["shown_after"] < 1.5, SEEN


@pytest.mark.django_db(transaction=True)
def test_reports_from_inside_a_transaction_never_wait_for_the_writer_thread(admin_user):
    run = run_launch(kind="atomic", config={}, user=admin_user, enqueue=False)
    began = time.monotonic()
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.status == "succeeded" and time.monotonic() - began < 30
    assert "line 39" in run.log and run.log.count("line ") == 40  # every line, once


@pytest.mark.django_db
def test_progress_never_goes_backwards_within_an_attempt(admin_user):
    """Behaviour cloning extending its steps reported 99% then 91%: the bar holds at 99%."""
    run = Run.objects.create(kind="phases", status="running", attempt=1, created_by=admin_user)
    reporter = RunReporter(run, interval=0)
    reporter.progress(0.99, "Behaviour cloning ...")
    reporter.progress(0.91, "Behaviour cloning ...")
    run.refresh_from_db()
    assert run.progress == pytest.approx(0.99)
    reporter.phase("Evaluating on 40 eval tasks ...")  # a phase keeps the progress reached
    run.refresh_from_db()
    assert run.progress == pytest.approx(0.99) and run.progress_message == "Evaluating on 40 eval tasks ..."


@pytest.mark.django_db
def test_a_failed_run_shows_its_one_line_reason_not_100_percent_or_a_traceback(admin_user, client):
    run = run_launch(kind="fails", config={}, user=admin_user, enqueue=False)
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "ValueError: the endpoint refused every call (the rest is in the worker's log)"
    assert "Traceback" not in run.log and "Traceback" not in run.error
    client.force_login(admin_user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "100.0%" not in page and "Traceback" not in page and "the endpoint refused every call" in page
    listing = client.get("/runs/").content.decode()
    assert "100.0%" not in listing

    halfway = run_launch(kind="fails", config={"progress": 0.4}, user=admin_user, enqueue=False)
    run_execute(run_id=halfway.pk, attempt=1)
    assert "It had reached 40.0%." in client.get(f"/runs/{halfway.pk}/").content.decode()
    assert "stopped at 40.0%" in client.get("/runs/").content.decode()


@pytest.mark.django_db
def test_the_device_says_the_threads_the_config_uses(admin_user):
    """A BC run's config said 1 thread while its page said "CPU (2 threads)": one value feeds both."""
    # A thread count other than torch's own on this machine, so the page can only say it from the config.
    threads = 1 if torch.get_num_threads() > 1 else 2
    run = run_launch(kind="threaded", config={"threads": threads}, user=admin_user, enqueue=False)
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.device == f"CPU ({threads} thread{'s' if threads > 1 else ''})" == SEEN["compute_name"]
    cpu = Compute(device="cpu", name="CPU (2 threads)", bf16=False, gpus=0, worker="box", threads=2)
    assert compute_for(cpu, ThreadedConfig(threads=0)).name == "CPU (2 threads)"  # 0: torch's own count
    assert compute_for(cpu, PhasesConfig()).name == "CPU (2 threads)"  # no threads setting
    gpu = Compute(device="cuda", name="H200", bf16=True, gpus=1, worker="gpu")
    assert compute_for(gpu, ThreadedConfig(threads=1)).name == "H200"


@pytest.mark.django_db
def test_a_run_form_says_about_how_long_the_run_takes_here_from_past_runs(admin_user, client):
    client.force_login(admin_user)
    page = client.get("/runs/new/ppo/").content.decode()
    assert "No PPO run has succeeded here yet, so there is no estimate" in page
    default = RLRunConfig()
    episodes = default.iterations * default.episodes_per_iteration
    now = timezone.now()
    # A past run of half the default's episodes that took 10 minutes: the default takes about 20.
    Run.objects.create(
        kind="ppo",
        status="succeeded",
        created_by=admin_user,
        worker="box",
        config={"iterations": default.iterations // 2 or 1, "episodes_per_iteration": default.episodes_per_iteration},
        started_at=now - timedelta(seconds=600),
        finished_at=now,
    )
    per_episode = 600 / ((default.iterations // 2 or 1) * default.episodes_per_iteration)
    expected = per_episode * episodes
    page = client.get("/runs/new/ppo/").content.decode()
    assert f"About <strong>{round(expected / 60)} min</strong> on this worker" in page, page[:3000]
    assert "an estimate from the last 1 PPO run that succeeded here (on box)" in page
    assert f"{episodes} training episodes at about" in page
    # The estimate follows the settings posted: twice the iterations, about twice as long.
    form = client.get("/runs/new/ppo/").context["form"]
    data = {**as_a_browser_posts(form), "iterations": str(default.iterations * 2)}
    page = client.post("/runs/new/ppo/", data).content.decode()
    assert f"{2 * episodes} training episodes at about" in page
