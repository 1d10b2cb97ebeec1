"""Celery tasks of the core app: the one task that executes a run of any kind (`gpu` queue)."""
from __future__ import annotations

from celery import shared_task

from webapp.runs import run_execute


# No time limit: a training run may take hours; cancel and the heartbeat bound it instead.
@shared_task(name="webapp.run_execute", acks_late=True)
def run_execute_task(run_id: int, attempt: int) -> None:
    run_execute(run_id=run_id, attempt=attempt)
