"""One lifecycle for every background job: imports, dataset builds, campaign fills and
training runs.

    queued --(a worker claims it)--> running --> succeeded | failed | cancelled

Every kind goes through the same edges here: `job_dispatch` runs a small job in the request
and queues a large one (the size limits are each kind's settings: IMPORT_INLINE_MAX_BYTES,
SNAPSHOT_INLINE_MAX_JUDGEMENTS, FILL_INLINE_MAX_TRAJECTORIES; runs are always queued);
`job_claim` lets exactly one worker take a queued job; `job_finish` writes its end once. A
failed job, inline or queued, stays with its reason.

A job model inherits `Job` (status, heartbeat, start and finish times, the failure
reason). While a worker executes a job, a `Heartbeat` thread beats its `heartbeat_at`;
`jobs_sweep_stale()` runs on a schedule (Celery beat, every JOB_SWEEP_SECONDS) and fails
every running job whose heartbeat is older than its kind's stale limit, with the reason,
so a job whose worker died is failed within a minute whether or not anyone opens a page.

The fields and statuses live in `webapp.models` (`Job`, `JobStatus`). Apps register their
job models in `AppConfig.ready()` with `job_kind_register`, so this core module imports
none of them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from webapp.models import Job, JobStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobKind:
    model: type[Job]
    stale_seconds: Callable[[], float]
    # sweep(queryset of stale running jobs, now) -> number failed; the default fails each with `reason`.
    reason: str = "Its worker stopped sending heartbeats: the process was killed or its machine was lost."
    reason_fields: tuple[str, ...] = ("error",)  # where the reason is written
    sweep: Callable | None = None


_KINDS: dict[str, JobKind] = {}


def job_kind_register(kind: JobKind) -> None:
    _KINDS[kind.model._meta.label] = kind


def jobs_fail_stale(kind: JobKind, *, older_than: float | None = None) -> int:
    """Fail the running jobs of one kind whose heartbeat is older than its stale limit (or
    than `older_than` seconds: 0 fails every running job, for when no worker is running)."""
    now = timezone.now()
    limit = kind.stale_seconds() if older_than is None else older_than
    stale = kind.model.objects.filter(status=JobStatus.RUNNING, heartbeat_at__lt=now - timedelta(seconds=limit))
    if kind.sweep is not None:
        return kind.sweep(stale, now)
    return stale.update(status=JobStatus.FAILED, finished_at=now, **{f: kind.reason for f in kind.reason_fields})


def jobs_sweep_stale(*, older_than: float | None = None) -> dict[str, int]:
    """Fail every stale job of every kind; returns how many per model (Celery beat runs this;
    `make run` runs it with `older_than=0` before it starts its worker: a job still running
    then lost its worker when the last `make run` stopped)."""
    counts = {}
    for label, kind in _KINDS.items():
        counts[label] = jobs_fail_stale(kind, older_than=older_than)
        if counts[label]:
            logger.warning("failed %d stale %s job(s)", counts[label], label)
    return counts


def task_send(name: str, *args, queue: str | None = None) -> None:
    """Queue the Celery task called `name` with `args`. Services queue tasks by name: the tasks
    modules import the services (a task is a thin edge that calls one), so a service that
    imported its task would make a cycle; the routes (arbiter/celery.py) read the name too."""
    current_app.send_task(name, args=list(args), queue=queue)


def job_dispatch(job: Job, *, inline: bool, run: Callable[[int], None], task: str) -> Job:
    """Run a just-created job now (`inline`, in the caller's process) or queue the Celery task
    called `task` once the transaction that created it commits. Returns the job as it stands."""
    if inline:
        run(job.pk)
        job.refresh_from_db()
    else:
        transaction.on_commit(lambda: task_send(task, job.pk))
    return job


def job_claim(model: type[Job], pk: int, **guard) -> bool:
    """Take a queued job: True for exactly one caller (the others find it taken and do nothing).
    `guard` narrows the claim (a run's attempt)."""
    now = timezone.now()
    return bool(
        model.objects.filter(pk=pk, status=JobStatus.QUEUED, **guard).update(
            status=JobStatus.RUNNING, started_at=now, heartbeat_at=now
        )
    )


def job_finish(model: type[Job], pk: int, *, status: str, guard: dict | None = None, **fields) -> bool:
    """Write a job's end, once, by the worker that ran it: over `running`, or over a failure the
    stale sweep wrote meanwhile (the worker was alive after all, and what it wrote is committed,
    so its own word is the truth), never over a later attempt (`guard`, a run's attempt) or a
    job that already ended otherwise. Returns whether it was written."""
    now = timezone.now()
    ending = model.objects.filter(pk=pk, **(guard or {})).filter(
        Q(status=JobStatus.RUNNING) | Q(status=JobStatus.FAILED, finished_at__gt=F("heartbeat_at"))
    )
    return bool(ending.update(status=status, finished_at=now, heartbeat_at=now, **fields))


class Heartbeat(threading.Thread):
    """Beats `heartbeat_at` of one running job every few seconds, on its own connection.

    A write that fails (a locked SQLite file, a dropped connection) is retried at the next
    beat: only a dead process stops the heartbeat.
    """

    def __init__(self, model: type[Job], pk: int, *, interval: float | None = None, **guard):
        super().__init__(daemon=True, name=f"heartbeat-{model._meta.model_name}-{pk}")
        self.model, self.pk, self.guard = model, pk, guard
        self.interval = settings.JOB_HEARTBEAT_SECONDS if interval is None else interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    self.model.objects.filter(pk=self.pk, status=JobStatus.RUNNING, **self.guard).update(
                        heartbeat_at=timezone.now()
                    )
                except DatabaseError:
                    logger.warning("heartbeat of %s %s could not be written; retrying", self.model.__name__, self.pk)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
