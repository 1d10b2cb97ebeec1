"""The run machinery in-process: configs, launch, the execute life cycle, cancel, stale runs, resume.

A small kind registered here exercises the machinery; the real kinds run through a real
Celery worker in tests/training/test_rollout_run.py and tests/rewardmodel/test_runs.py.
"""

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from core.configs import config_from_input, field_help, simple_fields
from webapp.errors import ArbiterError
from webapp.jobs import jobs_sweep_stale
from webapp.models import Run, RunMetric
from webapp.runs.kinds import RunKind, register
from webapp.runs.services import (
    RunCancelled,
    run_cancel,
    run_execute,
    run_launch,
    run_resume,
)

pytestmark = pytest.mark.django_db


@dataclass
class CountConfig:
    steps: int = field(default=3, metadata={"help": "how many steps to count"})
    rate: float = field(default=0.5, metadata={"help": "a number that must be positive"})
    label: str = field(default="x", metadata={"help": "free text"})
    fail_at: int = field(default=-1, metadata={"help": "raise at this step (-1: never)"})
    checkpoint_every: int = field(default=0, metadata={"help": "write a checkpoint every this many steps (0: none)"})

    def validate(self) -> list[str]:
        return ["rate: must be positive."] if self.rate <= 0 else []


SEEN = {}


def _count(*, run, config, reporter, compute, resume_from):
    start = int(Path(resume_from).read_text()) if resume_from else 0
    SEEN["resume_from"], SEEN["device"] = start, compute.device
    for step in range(start + 1, config.steps + 1):
        if reporter.should_stop():
            raise RunCancelled()
        if step == config.fail_at:
            raise RuntimeError(f"boom at step {step}")
        reporter.metrics(step, {"loss/train": 1.0 / step, "nan": float("nan")})
        reporter.progress(step / config.steps, f"step {step}")
        if config.checkpoint_every and step % config.checkpoint_every == 0:
            path = Path(run.config.get("label")) / f"ckpt-{run.pk}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(step))
            reporter.checkpoint(step, str(path))
    return {"counted": config.steps - start}


register(
    RunKind(
        name="count",
        label="Count",
        description="counts",
        config_class=CountConfig,
        execute=_count,
        check=lambda c: ["label: 'forbidden' is not allowed."] if c.label == "forbidden" else [],
        lineage=lambda c: [{"direction": "input", "type": "thing", "id": 1, "label": c.label, "url": ""}],
        resumable=True,
    )
)


@pytest.fixture(autouse=True)
def _no_queue(monkeypatch):
    """Launches are recorded, not sent: these tests call run_execute themselves."""
    sent = []
    monkeypatch.setattr("webapp.runs.services._enqueue", lambda run: sent.append((run.pk, run.attempt)))
    return sent


def test_configs_take_defaults_coerce_input_and_list_every_problem():
    assert config_from_input(CountConfig, {"steps": "4", "rate": "0.1"}) == CountConfig(steps=4, rate=0.1)
    with pytest.raises(ValueError) as exc:
        config_from_input(CountConfig, {"steps": 2.5, "rate": "fast", "colour": "red"})
    assert str(exc.value).splitlines() == [
        "colour: unknown setting.",
        "steps: expected a whole number, got 2.5.",
        "rate: expected a number, got 'fast'.",
    ]
    with pytest.raises(ValueError, match="rate: must be positive"):
        config_from_input(CountConfig, {"rate": -1})
    with pytest.raises(ValueError, match="finite"):
        config_from_input(CountConfig, {"rate": "nan"})
    assert field_help(CountConfig)["steps"] == "how many steps to count"
    assert [f[0] for f in simple_fields(CountConfig)] == ["steps", "rate", "label", "fail_at", "checkpoint_every"]


def test_an_invalid_launch_is_refused_before_anything_is_queued(admin_user, _no_queue):
    with pytest.raises(ArbiterError, match="rate: must be positive"):
        run_launch(kind="count", config={"rate": -0.1}, user=admin_user)
    with pytest.raises(ArbiterError, match="forbidden"):
        run_launch(kind="count", config={"label": "forbidden"}, user=admin_user)
    with pytest.raises(ArbiterError, match="Unknown run kind"):
        run_launch(kind="nope", config={}, user=admin_user)
    assert not Run.objects.exists() and not _no_queue


def test_a_repeated_launch_key_makes_one_run(admin_user, _no_queue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = run_launch(kind="count", config={}, user=admin_user, idempotency_key="k1")
        again = run_launch(kind="count", config={}, user=admin_user, idempotency_key="k1")
        other = run_launch(kind="count", config={}, user=admin_user, idempotency_key="k2")
    assert first.pk == again.pk != other.pk
    assert Run.objects.count() == 2 and len(_no_queue) == 2
    assert first.lineage == [{"direction": "input", "type": "thing", "id": 1, "label": "x", "url": ""}]


def test_execute_records_progress_metrics_device_and_the_summary(admin_user):
    run = run_launch(kind="count", config={"steps": 4}, user=admin_user)
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.progress == 1.0 and run.summary == {"counted": 4}
    assert run.device.startswith("CPU") and run.worker and run.started_at and run.finished_at
    assert SEEN["device"] == "cpu"
    metrics = list(RunMetric.objects.filter(run=run).order_by("step").values_list("step", "values"))
    assert metrics[0] == (1, {"loss/train": 1.0, "nan": None}) and len(metrics) == 4
    # A second delivery of the same task message does nothing.
    run_execute(run_id=run.pk, attempt=1)
    assert RunMetric.objects.filter(run=run).count() == 4


def test_a_failing_job_is_failed_with_its_error_and_can_resume_from_its_checkpoint(
    admin_user, tmp_path, _no_queue, django_capture_on_commit_callbacks
):
    run = run_launch(
        kind="count", config={"steps": 6, "fail_at": 5, "checkpoint_every": 2, "label": str(tmp_path)}, user=admin_user
    )
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.status == "failed" and run.error == "RuntimeError: boom at step 5"
    # The reason is in the run's log; the traceback only in the worker's (issue 53).
    assert run.checkpoint["step"] == 4 and "Failed: RuntimeError: boom at step 5" in run.log
    assert "Traceback" not in run.log
    # Metrics past the checkpoint are dropped; the next attempt starts after step 4.
    with django_capture_on_commit_callbacks(execute=True):
        resumed = run_resume(run_id=run.pk)
    assert resumed.status == "queued" and resumed.attempt == 2 and _no_queue[-1] == (run.pk, 2)
    assert max(RunMetric.objects.filter(run=run).values_list("step", flat=True)) == 4
    Run.objects.filter(pk=run.pk).update(config={**run.config, "fail_at": -1})
    run_execute(run_id=run.pk, attempt=1)  # the old attempt's message is ignored
    assert Run.objects.get(pk=run.pk).status == "queued"
    run_execute(run_id=run.pk, attempt=2)
    run.refresh_from_db()
    assert run.status == "succeeded" and SEEN["resume_from"] == 4 and run.summary == {"counted": 2}
    assert sorted(RunMetric.objects.filter(run=run).values_list("step", flat=True)) == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ArbiterError, match="Only a failed or cancelled run"):
        run_resume(run_id=run.pk)


def test_a_resume_whose_checkpoint_is_gone_starts_again_with_no_metric_twice(
    admin_user, tmp_path, django_capture_on_commit_callbacks
):
    run = run_launch(
        kind="count", config={"steps": 6, "fail_at": 5, "checkpoint_every": 2, "label": str(tmp_path)}, user=admin_user
    )
    run_execute(run_id=run.pk, attempt=1)
    Path(Run.objects.get(pk=run.pk).checkpoint["path"]).unlink()  # deleted since (a disk cleaned up, say)
    with django_capture_on_commit_callbacks(execute=True):
        run_resume(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(config={**run.config, "fail_at": -1})
    run_execute(run_id=run.pk, attempt=2)
    run.refresh_from_db()
    assert run.status == "succeeded" and SEEN["resume_from"] == 0 and "is gone" in run.log
    assert sorted(RunMetric.objects.filter(run=run).values_list("step", flat=True)) == [1, 2, 3, 4, 5, 6]


def test_cancel_a_queued_run_at_once_and_a_running_one_at_its_next_step(admin_user):
    queued = run_launch(kind="count", config={}, user=admin_user)
    assert run_cancel(run_id=queued.pk).status == "cancelled"
    run_execute(run_id=queued.pk, attempt=1)  # its task arrives later and does nothing
    assert Run.objects.get(pk=queued.pk).status == "cancelled"
    with pytest.raises(ArbiterError, match="already ended"):
        run_cancel(run_id=queued.pk)

    running = run_launch(kind="count", config={"steps": 5}, user=admin_user)
    Run.objects.filter(pk=running.pk).update(cancel_requested=True)  # as if cancelled just after it started
    run_execute(run_id=running.pk, attempt=1)
    running.refresh_from_db()
    assert running.status == "cancelled" and not RunMetric.objects.filter(run=running).exists()


def test_a_run_whose_heartbeat_is_stale_is_failed_with_the_reason(admin_user, settings):
    settings.RUN_STALE_SECONDS = 30
    run = run_launch(kind="count", config={}, user=admin_user)
    old = timezone.now() - timedelta(seconds=31)
    Run.objects.filter(pk=run.pk).update(status="running", heartbeat_at=old, checkpoint={"step": 7, "path": "/tmp/x"})
    fresh = run_launch(kind="count", config={}, user=admin_user)
    Run.objects.filter(pk=fresh.pk).update(status="running", heartbeat_at=timezone.now())
    assert jobs_sweep_stale()["webapp.Run"] == 1
    run.refresh_from_db()
    assert run.status == "failed" and "stopped sending heartbeats" in run.error and "step 7" in run.error
    assert Run.objects.get(pk=fresh.pk).status == "running"


@dataclass
class OptionalConfig:
    rate: float | None = None  # empty: a default picked later


def test_optional_fields_take_none_and_numbers():
    assert config_from_input(OptionalConfig, {"rate": None}) == OptionalConfig(rate=None)
    assert config_from_input(OptionalConfig, {"rate": "0.5"}) == OptionalConfig(rate=0.5)


def test_the_web_process_loads_every_run_kind_without_torch():
    """Kinds are registered at start-up; their configs must not pull in torch or transformers."""
    import subprocess
    import sys

    code = (
        "import os, sys, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'arbiter.settings'; django.setup(); "
        "import arbiter.urls; from webapp.runs.kinds import all_kinds; "
        "print(sorted(k.name for k in all_kinds()), 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False False")
    assert (
        "['bc', 'best_of_n', 'dpo', 'evaluation', 'expert_iteration', 'grpo', 'judge', 'ppo', 'reward_model', "
        "'reward_scoring', 'rloo', 'rollout', 'round', 'sft']" in out
    )


def test_a_run_of_a_kind_the_worker_does_not_know_fails_with_the_reason(admin_user):
    run = Run.objects.create(kind="retired-kind", status="queued", attempt=1, created_by=admin_user)
    run_execute(run_id=run.pk, attempt=1)
    run.refresh_from_db()
    assert run.status == "failed" and "knows no run kind 'retired-kind'" in run.error
