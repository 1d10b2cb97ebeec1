"""A run asks no more than its worker holds (issue 45): processes or threads beyond the worker's
CPUs, or a CPU model too large for its memory, fail the run when it starts, with the reason,
before anything trains."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from webapp.compute import Compute, capacity_problems

CPU = Compute(device="cpu", name="CPU (2 threads)", bf16=False, gpus=0, worker="box")


@dataclass
class Settings:
    processes: int = 1
    threads: int = 0
    hidden: int = 0
    layers: int = 0


@pytest.mark.parametrize(
    ("settings", "found"),
    [
        (Settings(processes=64), "processes: 64 on a worker with 2 CPUs"),
        (Settings(threads=256), "threads: 256 on a worker with 2 CPUs"),
        (Settings(processes=2, threads=2), "processes x threads: 2 x 2 on 2 CPUs"),
        (Settings(hidden=4096, layers=48), "GiB free"),
    ],
)
def test_what_a_two_core_worker_cannot_hold_is_named(settings, found):
    problems = capacity_problems(settings, CPU, cpus=2, memory=24 * 2**30)
    assert any(found in p for p in problems), problems


def test_what_it_can_hold_passes():
    assert capacity_problems(Settings(processes=2, threads=1, hidden=256, layers=6), CPU, cpus=2, memory=2**33) == []
    gpu = Compute(device="cuda", name="H200", bf16=True, gpus=1, worker="gpu")
    assert capacity_problems(Settings(hidden=4096, layers=48), gpu, cpus=16, memory=2**30) == []


@pytest.mark.django_db
def test_a_run_asking_too_much_fails_at_start_with_the_reason(admin_user, monkeypatch):
    import os

    from webapp.models import Run
    from webapp.runs.services import run_execute, run_launch

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    run = run_launch(kind="bc", config={"threads": 64, "environment": "encyclopedia"}, user=admin_user, enqueue=False)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "threads: 64 on a worker with 2 CPUs" in run.error
