"""Which Celery workers are alive, and what a queued run waits for.

Every worker process beats a `WorkerBeat` row (its hostname, the queues it takes) every
WORKER_BEAT_SECONDS from a thread started when it is ready, and deletes the row when it shuts
down. A worker whose row has not been beaten for WORKER_ALIVE_SECONDS is dead (killed, or its
machine lost): the pages that list jobs say so instead of showing work "queued" forever.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone

from webapp.models import Run, WorkerBeat

logger = logging.getLogger(__name__)


def worker_beat(hostname: str, queues: list[str], *, started_at: datetime) -> None:
    WorkerBeat.objects.update_or_create(
        hostname=hostname,
        defaults={
            "queues": ",".join(sorted(queues)),
            "pid": os.getpid(),
            "started_at": started_at,
            "beat_at": timezone.now(),
        },
    )


class _Beater(threading.Thread):
    def __init__(self, hostname: str, queues: list[str]):
        super().__init__(daemon=True, name="worker-beat")
        self.hostname, self.queues = hostname, queues
        self.started_at = timezone.now()
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while True:
                try:
                    worker_beat(self.hostname, self.queues, started_at=self.started_at)
                except DatabaseError:
                    logger.warning("worker beat could not be written; retrying")
                    connection.close()
                if self.stopped.wait(settings.WORKER_BEAT_SECONDS):
                    return
        finally:
            connection.close()


_beater: _Beater | None = None


def _start_beating(sender, **kwargs) -> None:
    global _beater
    queues = list(sender.app.amqp.queues.consume_from or sender.app.amqp.queues)
    _beater = _Beater(sender.hostname, queues)
    _beater.start()


def _stop_beating(sender, **kwargs) -> None:
    if _beater is None:
        return
    _beater.stopped.set()
    _beater.join(timeout=5)
    try:
        WorkerBeat.objects.filter(hostname=_beater.hostname).delete()
    except DatabaseError:
        logger.warning("could not remove this worker's beat; it will read as dead soon")


def connect_worker_signals() -> None:
    """Beat from the Celery worker this process becomes (called when Django is ready, which a
    worker is before it says it is ready: Celery's Django fixup sets Django up as it starts)."""
    worker_ready.connect(_start_beating, dispatch_uid="webapp.workers.start_beating")
    worker_shutdown.connect(_stop_beating, dispatch_uid="webapp.workers.stop_beating")


@dataclass(frozen=True)
class QueueState:
    queue: str
    alive: list  # WorkerBeat rows of live workers that take this queue
    last_seen: datetime | None  # the last beat of any worker that took it, when none is alive

    @property
    def has_worker(self) -> bool:
        return bool(self.alive)


def queue_state(queue: str, rows: list | None = None) -> QueueState:
    """The live workers that take `queue`, or when one was last seen (`rows`: the WorkerBeat rows,
    when the caller has read them already)."""
    since = timezone.now() - timedelta(seconds=settings.WORKER_ALIVE_SECONDS)
    rows = list(WorkerBeat.objects.all()) if rows is None else rows
    takers = sorted((w for w in rows if queue in w.queue_names), key=lambda w: w.beat_at, reverse=True)
    alive = [w for w in takers if w.beat_at >= since]
    return QueueState(queue, alive, None if alive or not takers else takers[0].beat_at)


def worker_overview(worker) -> dict:
    """A row of the workers API: a WorkerBeat with `alive`."""
    since = timezone.now() - timedelta(seconds=settings.WORKER_ALIVE_SECONDS)
    return {
        "hostname": worker.hostname,
        "queues": worker.queue_names,
        "pid": worker.pid,
        "started_at": worker.started_at,
        "beat_at": worker.beat_at,
        "alive": worker.beat_at >= since,
    }


def queues_overview() -> dict:
    """Each known queue's live workers and when one was last seen, over every worker (the
    workers API's summary beside its page of workers)."""
    rows = list(WorkerBeat.objects.all())
    queues = sorted({"default", settings.RUN_QUEUE, *(q for w in rows for q in w.queue_names)})
    states = {q: queue_state(q, rows) for q in queues}
    return {q: {"alive": len(s.alive), "last_seen": s.last_seen} for q, s in states.items()}


@dataclass(frozen=True)
class RunWait:
    position: int  # 1 = next to start
    ahead: list  # queued runs before it
    running: list  # runs its queue's workers are busy with
    minutes_left: float | None  # the running run's own estimate, when it has made progress


def run_queue(run) -> str:
    """The queue a run was sent to (runs from before the field: RUN_QUEUE)."""
    return run.queue or settings.RUN_QUEUE


def _on_queue(queue: str):
    return Q(queue=queue) | Q(queue="") if queue == settings.RUN_QUEUE else Q(queue=queue)


def run_wait(run) -> RunWait | None:
    """For a queued run: its place in the line and what it waits for (None once it started)."""
    if run.status != Run.Status.QUEUED:
        return None
    same_queue = _on_queue(run_queue(run))  # a run waits only for the runs of its own queue
    queued = Run.objects.filter(same_queue, status=Run.Status.QUEUED).exclude(pk=run.pk)
    mine = run.queued_at or run.created_at
    ahead = list(queued.filter(queued_at__lt=mine).order_by("queued_at", "pk").only("pk", "name", "kind"))
    running = list(
        Run.objects.filter(same_queue, status=Run.Status.RUNNING)
        .order_by("started_at")
        .only("pk", "name", "kind", "progress", "started_at")
    )
    return RunWait(len(ahead) + 1, ahead, running, minutes_left(running))


def minutes_left(running) -> float | None:
    """The soonest any running run ends, from its progress so far (None when none has 5%)."""
    now = timezone.now()
    estimates = [
        (now - r.started_at).total_seconds() * (1 - r.progress) / r.progress / 60
        for r in running
        if r.started_at and r.progress >= 0.05
    ]
    return min(estimates) if estimates else None
