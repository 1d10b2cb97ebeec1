"""Runs: launch, execute on a worker, report, cancel, resume, and fail the stale ones.

The life of a run:

    queued --(a worker claims it)--> running --> succeeded | failed | cancelled
    failed / cancelled --(resume)--> queued (attempt + 1, from the last checkpoint)

Every write a worker makes is guarded by the run's attempt number, so a worker that lost
its run (it was failed as stale, then resumed elsewhere) can no longer change it. A run is
a job (webapp/jobs.py): while it executes, a thread beats its heartbeat, and the scheduled
sweep fails a run whose heartbeat is older than RUN_STALE_SECONDS with the reason (by
`runs_sweep_stale`), so nothing stays "running" forever.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, FloatField, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from core.configs import config_as_json, config_from_input
from webapp.compute import capacity_problems, compute_for, pick_compute
from webapp.errors import ArbiterError
from webapp.jobs import Heartbeat, job_claim, job_finish, task_send
from webapp.models import Run, RunMetric
from webapp.runs.kinds import get_kind

logger = logging.getLogger(__name__)
LOG_LINES = 300


class RunCancelled(Exception):
    """Raised by a kind's execute when its training code stopped on a cancel request."""


def run_dir(run: Run) -> Path:
    path = Path(settings.VAR_DIR) / "runs" / str(run.pk)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- Launch, cancel, resume --------------------------------------------------------------


def run_launch(
    *, kind: str, config: dict | None, user, name: str = "", idempotency_key: str = "", enqueue: bool = True
) -> Run:
    """Validate and queue a run. A launch repeated with the same key returns the first run.

    `enqueue=False` leaves it queued for the caller to execute in-process (`run_execute`).
    """
    run_kind = get_kind(kind)
    if run_kind is None:
        raise ArbiterError(f"Unknown run kind {kind!r}.")
    if idempotency_key:
        existing = Run.objects.filter(created_by=user, idempotency_key=idempotency_key).first()
        if existing:
            return existing
    try:
        parsed = config_from_input(run_kind.config_class, config or {})
    except ValueError as exc:
        problems = str(exc).splitlines()
        raise ArbiterError("The config is not valid: " + " ".join(problems), details=problems) from None
    problems = run_kind.check(parsed)
    if problems:
        raise ArbiterError("The run cannot start: " + " ".join(problems), details=problems)
    try:
        with transaction.atomic():
            run = Run.objects.create(
                kind=kind,
                name=name[:200] or run_kind.label,
                config=config_as_json(parsed),
                lineage=run_kind.lineage(parsed),
                created_by=user,
                idempotency_key=idempotency_key[:64],
                attempt=1,
                queued_at=timezone.now(),
                queue=run_queue_for(run_kind, parsed) if enqueue else IN_PROCESS,
            )
            if enqueue:
                transaction.on_commit(lambda: _enqueue(run))
    except IntegrityError:
        # The same key raced in from a double click: the first launch won.
        return Run.objects.get(created_by=user, idempotency_key=idempotency_key)
    return run


IN_PROCESS = "in-process"  # a run its caller executes itself (run_pipeline): no worker's queue waits for it


def run_queue_for(run_kind, config) -> str:
    """The queue a run goes to: the housekeeping queue for a run that loads no model (it must not
    wait 25 minutes behind a behaviour cloning for a 2-second rubric judge), else RUN_QUEUE."""
    return settings.CELERY_TASK_DEFAULT_QUEUE if run_kind.light(config) else settings.RUN_QUEUE


def _enqueue(run: Run) -> None:
    task_send("webapp.run_execute", run.pk, run.attempt, queue=run.queue or settings.RUN_QUEUE)


def run_cancel(*, run_id: int) -> Run:
    """A queued run is cancelled at once; a running one stops within one training step."""
    run = Run.objects.get(pk=run_id)
    now = timezone.now()
    if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED, finished_at=now, progress_message="Cancelled before it started."
    ):
        return Run.objects.get(pk=run_id)
    if not Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(cancel_requested=True):
        raise ArbiterError(f"Run #{run.pk} has already ended ({run.status}); there is nothing to cancel.")
    return Run.objects.get(pk=run_id)


def run_resume(*, run_id: int) -> Run:
    """Queue a failed or cancelled run again, from its last checkpoint when it has one."""
    run = Run.objects.get(pk=run_id)
    kind = get_kind(run.kind)
    if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
        raise ArbiterError(f"Only a failed or cancelled run can be resumed; run #{run.pk} is {run.status}.")
    if kind is None or not kind.resumable:
        raise ArbiterError(f"Runs of kind {run.kind!r} cannot be resumed; launch a new one.")
    step = run.checkpoint.get("step") if run.checkpoint.get("path") else None
    try:  # a resumed run goes to a worker's queue, even one its first caller executed in-process
        queue = run_queue_for(kind, config_from_input(kind.config_class, run.config))
    except ValueError:
        queue = settings.RUN_QUEUE
    with transaction.atomic():
        updated = Run.objects.filter(pk=run_id, status=run.status).update(
            status=Run.Status.QUEUED,
            queue=queue,
            attempt=run.attempt + 1,
            cancel_requested=False,
            error="",
            finished_at=None,
            queued_at=timezone.now(),
            # From its checkpoint a run goes on from where it was; without one it starts again from 0.
            **({} if step is not None else {"progress": 0.0}),
            progress_message=f"Resuming from the checkpoint at step {step}."
            if step is not None
            else "Restarting from the beginning (no checkpoint was written).",
        )
        if not updated:
            raise ArbiterError(f"Run #{run.pk} changed while resuming; reload and try again.")
        _metrics_after(run_id, step).delete()
        run.refresh_from_db()
        _append_log(run, run.progress_message)
        transaction.on_commit(lambda: _enqueue(run))
    return run


def _metrics_after(run_id: int, step: int | None):
    """The run's metrics after the checkpoint at `step` (all of them with no checkpoint): the
    next attempt logs those steps again."""
    metrics = RunMetric.objects.filter(run_id=run_id)
    return metrics if step is None else metrics.filter(step__gt=step)


def runs_sweep_stale(stale, now) -> int:
    """The run kind's sweep (webapp/jobs.py): stale runs are failed, or cancelled when that was asked."""
    changed = 0
    for run in stale.only("pk", "heartbeat_at", "cancel_requested", "checkpoint"):
        seen = run.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        if run.cancel_requested:
            status, reason = Run.Status.CANCELLED, f"Cancelled; its worker stopped responding (last heartbeat {seen})."
        else:
            status = Run.Status.FAILED
            reason = (
                f"The worker stopped sending heartbeats (last at {seen}): its process was killed or its "
                f"machine was lost."
            )
            if run.checkpoint.get("path"):
                reason += f" Resume to continue from the checkpoint at step {run.checkpoint['step']}."
        changed += stale.filter(pk=run.pk).update(status=status, error=reason, finished_at=now)
    return changed


# --- Execution on a worker --------------------------------------------------------------


class RunReporter:
    """What training code calls while it works: progress, phases, metrics, logs, checkpoints,
    cancel checks.

    Writes are throttled (progress and logs at most every `interval` seconds) and guarded
    by the attempt, so a superseded worker changes nothing. What the throttle held back is
    written by the reporter's own thread within `interval` seconds: a phase announced just
    before a step that reports nothing for minutes (judging the start, a rollout) shows on the
    run page as it begins, not when the next report comes. Progress never goes backwards within
    an attempt: the stored value is the highest reported (`Greatest` in the one update that
    writes it), so a schedule that grows (behaviour cloning extending its steps) holds its bar.
    """

    def __init__(self, run: Run, *, interval: float = 0.5):
        self.run_id, self.attempt = run.pk, run.attempt
        self.interval = interval
        self._last_flush = 0.0
        self._last_stop_check = 0.0
        self._stop = False
        self._pending_log: list[str] = []
        self._progress: tuple[float, str] | None = None
        self._fraction = 0.0  # the highest fraction reported in this attempt, for `phase`
        self._lock = threading.Lock()  # the pending state, held for no longer than a copy
        self._io = threading.Lock()  # one write to the database at a time
        self._closed = threading.Event()
        self._writer: threading.Thread | None = None

    def start(self) -> RunReporter:
        """Start the thread that writes what the throttle held back (run_execute starts it)."""
        self._writer = threading.Thread(target=self._write_held_back, name=f"run-{self.run_id}-reporter", daemon=True)
        self._writer.start()
        return self

    def _write_held_back(self) -> None:
        try:
            while not self._closed.wait(self.interval):
                try:
                    self._flush(force=True)
                except DatabaseError:  # a locked SQLite file, a dropped connection: the next beat retries
                    logger.warning("run %s: its progress could not be written; retrying", self.run_id)
                    connection.close()
        finally:
            connection.close()

    def _mine(self):
        return Run.objects.filter(pk=self.run_id, attempt=self.attempt, status=Run.Status.RUNNING)

    def progress(self, fraction: float, message: str = "") -> None:
        fraction = min(1.0, max(0.0, float(fraction)))
        with self._lock:
            self._fraction = max(self._fraction, fraction)
            self._progress = (fraction, message[:300])
        self._flush()

    def phase(self, message: str) -> None:
        """Say what the run is doing now (loading, judging, saving) without changing how far it is."""
        self.progress(self._fraction, message)

    def log(self, line: str) -> None:
        logger.info("run %s: %s", self.run_id, line)
        with self._lock:
            self._pending_log.append(str(line))
        self._flush()

    def metrics(self, step: int, values: dict) -> None:
        clean = {
            k: (float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None)
            for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if clean and self._mine().exists():
            RunMetric.objects.create(run_id=self.run_id, step=max(0, int(step)), values=clean)

    def checkpoint(self, step: int, path: str) -> None:
        self._mine().update(checkpoint={"step": int(step), "path": str(path)})
        self.log(f"Checkpoint at step {step}.")

    def should_stop(self) -> bool:
        """True once a cancel was asked (checked at most every 0.2 s)."""
        now = time.monotonic()
        if not self._stop and now - self._last_stop_check >= 0.2:
            self._last_stop_check = now
            self._stop = not self._mine().filter(cancel_requested=False).exists()
        return self._stop

    def _flush(self, force: bool = False, wait: bool = False) -> None:
        """Write what is pending. One write at a time (`_io`), and only the final one (`wait`)
        waits for another: a kind that reports from inside a transaction holds the run's row,
        and the writer thread's update then waits for that transaction; the training thread
        must never wait for the writer (it would wait for itself), so it leaves what is pending
        to the writer's next beat."""
        if not self._io.acquire(blocking=wait):
            return
        try:
            with self._lock:
                now = time.monotonic()
                if not force and now - self._last_flush < self.interval:
                    return
                if self._progress is None and not self._pending_log:
                    return
                self._last_flush = now
                progress, lines = self._progress, self._pending_log
                self._progress, self._pending_log = None, []
            written = False
            try:
                written = self._write(progress, lines)
            finally:
                if not written:  # kept for the next write (a newer progress wins)
                    with self._lock:
                        self._progress = self._progress or progress
                        self._pending_log = (lines + self._pending_log)[-LOG_LINES:]
        finally:
            self._io.release()

    def _write(self, progress: tuple[float, str] | None, lines: list[str]) -> bool:
        updates = {}
        if progress is not None:
            fraction, updates["progress_message"] = progress
            updates["progress"] = Greatest(F("progress"), Value(fraction, output_field=FloatField()))
        if lines:
            log = Run.objects.filter(pk=self.run_id).values_list("log", flat=True).first()
            if log is None:
                return False  # not visible to this connection (yet)
            updates["log"] = _tail(log, lines)
        return bool(self._mine().update(**updates))

    def close(self) -> None:
        self._closed.set()
        if self._writer is not None and self._writer is not threading.current_thread():
            self._writer.join(timeout=10)
        self._flush(force=True, wait=True)


def _tail(log: str, lines: list[str]) -> str:
    stamp = timezone.now().strftime("%H:%M:%S")
    merged = (log.splitlines() if log else []) + [f"[{stamp}] {line}" for line in lines]
    return "\n".join(merged[-LOG_LINES:])


def _append_log(run: Run, line: str) -> None:
    Run.objects.filter(pk=run.pk).update(log=_tail(run.log, [line]))


def run_execute(*, run_id: int, attempt: int) -> None:
    """Claim a queued run and execute it; its final status always gets written.

    The run page says what the worker is doing from the claim on: checking this worker, then
    each phase the kind announces (`RunReporter.phase`). A failure shows its one-line reason;
    the traceback goes to the worker's log only, never to the run's page."""
    if not job_claim(Run, run_id, attempt=attempt):
        logger.info("run %s attempt %s is not queued any more; nothing to do", run_id, attempt)
        return
    Run.objects.filter(pk=run_id, attempt=attempt).update(progress_message="Starting: checking this worker ...")
    run = Run.objects.get(pk=run_id)
    kind = get_kind(run.kind)
    if kind is None:
        _finish(
            run_id,
            attempt,
            Run.Status.FAILED,
            message="Failed.",
            error=f"This worker knows no run kind {run.kind!r}; is its app installed and up to date?",
        )
        return
    reporter = RunReporter(run).start()
    heartbeat = Heartbeat(Run, run_id, attempt=attempt)
    heartbeat.start()
    try:
        config = config_from_input(kind.config_class, run.config)
        compute = compute_for(pick_compute(), config)  # the threads the run will use, as its page says
        Run.objects.filter(pk=run_id, attempt=attempt).update(device=compute.name, worker=compute.worker)
        reporter.log(f"Attempt {attempt} on {compute.worker}, device {compute.name}.")
        problems = capacity_problems(config, compute)
        if problems:  # where only the worker knows its cores and memory: refused at start, with the reason
            raise ArbiterError(f"This worker ({compute.worker}, {compute.name}) cannot run it: " + " ".join(problems))
        reporter.phase("Starting: checking what the run reads ...")
        problems = kind.start_check(config)
        if problems:  # what only a worker can check: its environment starts, its tasks exist
            raise ArbiterError("The run cannot start: " + " ".join(problems))
        resume_from = run.checkpoint.get("path") if attempt > 1 else None
        if resume_from and not Path(resume_from).exists():
            reporter.log(f"The checkpoint {resume_from} is gone; starting from the beginning.")
            resume_from = None
            _metrics_after(run_id, None).delete()  # they will be logged again
            # A new attempt from the beginning: its progress starts again from 0 (the one time it goes back).
            Run.objects.filter(pk=run_id, attempt=attempt).update(progress=0.0)
        reporter.phase("Starting: loading ...")
        summary = kind.execute(run=run, config=config, reporter=reporter, compute=compute, resume_from=resume_from)
    except RunCancelled:
        reporter.close()
        _finish(run_id, attempt, Run.Status.CANCELLED, message="Cancelled.")
    except Exception as exc:
        logger.exception("run %s failed", run_id)  # the traceback, for whoever reads the worker's log
        reason = failure_reason(exc)
        reporter.log(f"Failed: {reason}")
        reporter.close()
        _finish(run_id, attempt, Run.Status.FAILED, error=reason, message="Failed.")
    else:
        reporter.close()
        _finish(run_id, attempt, Run.Status.SUCCEEDED, summary=summary or {}, message="Done.")
    finally:
        heartbeat.stop()


def failure_reason(exc: BaseException) -> str:
    """A failed run's reason as people read it: one line, no traceback. A domain error is its own
    sentence; anything else is named by its type, so an admin can find it in the worker's log."""
    text = exc.message if isinstance(exc, ArbiterError) else f"{type(exc).__name__}: {exc}"
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    return first[:500] + (" (the rest is in the worker's log)" if len(lines) > 1 or len(first) > 500 else "")


def json_safe(value):
    """`value` with every NaN or infinity replaced by None: PostgreSQL's JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _finish(
    run_id: int, attempt: int, status: str, *, error: str = "", summary: dict | None = None, message: str = ""
) -> None:
    updates = {"error": error, "progress_message": message}
    if summary is not None:
        updates.update(summary=json_safe(summary), progress=1.0)
    try:
        with transaction.atomic():
            job_finish(Run, run_id, status=status, guard={"attempt": attempt}, **updates)
    except DatabaseError as exc:  # a summary the database refuses: the run still ends, as failed
        logger.exception("run %s: its final state could not be written", run_id)
        job_finish(
            Run,
            run_id,
            status=Run.Status.FAILED,
            guard={"attempt": attempt},
            progress_message="Failed.",
            error=f"The run finished but its result could not be stored: {exc}",
        )


def run_add_lineage(*, run: Run, links: list[dict]) -> None:
    """Record rows the run wrote (a reward model, a policy) as output lineage: links made by
    `webapp.runs.lineage.lineage_link`, kept as outputs whatever direction they were made with."""
    current = Run.objects.only("lineage").get(pk=run.pk).lineage
    Run.objects.filter(pk=run.pk).update(lineage=current + [{**link, "direction": "output"} for link in links])


def run_add_artifact(*, run: Run, name: str, path: Path) -> None:
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    current = Run.objects.only("artifacts").get(pk=run.pk).artifacts
    Run.objects.filter(pk=run.pk).update(artifacts=current + [{"name": name, "path": str(path), "bytes": size}])
