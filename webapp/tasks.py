"""Celery tasks of the core app: the one task that executes a run of any kind (`gpu` queue), and
the scheduled sweep that fails jobs whose worker died (Celery beat, `default` queue)."""

from __future__ import annotations

from celery import shared_task

from webapp.jobs import jobs_sweep_stale
from webapp.runs.services import run_execute


# No time limit: a training run may take hours; cancel and the heartbeat bound it instead.
@shared_task(name="webapp.run_execute", acks_late=True)
def run_execute_task(run_id: int, attempt: int) -> None:
    run_execute(run_id=run_id, attempt=attempt)


# Beat sends one every JOB_SWEEP_SECONDS; a sweep is a few UPDATEs, so a minute is plenty.
@shared_task(name="webapp.sweep_stale_jobs", time_limit=60, soft_time_limit=50, ignore_result=True)
def sweep_stale_jobs_task() -> dict:
    return jobs_sweep_stale()
