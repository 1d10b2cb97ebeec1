"""Trajectory import: all or nothing, streamed, deduplicated by content hash.

One pass over the input inside one transaction: each line is parsed and checked, good
lines are written in batches of `BATCH_SIZE`, bad lines are collected with their number
and reason. If any line was bad the transaction is rolled back and `ArbiterError`
carries every reason, so the database is unchanged. Memory is bounded by the batch, not
the file.
"""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import connection, transaction

from annotate.input_records import DocumentError, TooLong, position_fields, records
from annotate.models import Campaign, ImportBatch, Policy, Task, Trajectory
from annotate.services.comparisons import comparisons_build
from annotate.services.environment_tools import environments_describe_missing
from annotate.trace_formats.reading import TRACE_FORMATS, detect_trace_format, dropped_reason, read_traces
from annotate.trajectory_formats import (
    Limits,
    ParsedTrajectory,
    TrajectoryFormatError,
    parse_line,
    parse_trajectory,
)
from core import json_input
from webapp.db import bulk_create_new, insert_new_rows
from webapp.errors import ArbiterError
from webapp.jobs import Heartbeat, job_claim, job_dispatch, job_finish

log = logging.getLogger(__name__)

BATCH_SIZE = 1000
# The columns an import writes; every other column of a trajectory takes the model's default.
_COPIED_FIELDS = (
    "task_id",
    "policy_id",
    "steps",
    "answer",
    "source",
    "outcome",
    "content_hash",
    "behaviour_hash",
    "num_steps",
    "metadata",
)
MAX_REPORTED_ERRORS = 1000


class ImportRejected(ArbiterError):
    """Some lines were bad; `details` lists them (capped), `error_count` counts them all."""

    def __init__(self, message: str, *, details: list[dict], error_count: int):
        super().__init__(message, details=details)
        self.error_count = error_count


@dataclass
class ImportReport:
    lines_read: int = 0  # lines of JSONL, or records of one JSON document (`layout`)
    layout: str = "jsonl"  # "jsonl" | "document"
    created: int = 0
    duplicates: int = 0
    comparisons_created: int = 0
    trajectory_ids: list[int] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    """What converters left out on purpose, summed over the input (`redacted_thinking`: n)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read,
            "layout": self.layout,
            "created": self.created,
            "duplicates": self.duplicates,
            "comparisons_created": self.comparisons_created,
            "dropped": dict(self.dropped),
        }

    def dropped_note(self) -> str:
        """One sentence for the command, the upload page and the API ('' when nothing was dropped)."""
        if not self.dropped:
            return ""
        return (
            " Dropped on purpose: "
            + "; ".join(f"{n} {dropped_reason(kind)}" for kind, n in sorted(self.dropped.items()))
            + "."
        )


def _limits() -> Limits:
    return Limits(max_text_chars=settings.TRAJECTORY_MAX_TEXT_CHARS, max_steps=settings.TRAJECTORY_MAX_STEPS)


def task_key(task: dict) -> tuple[str, str]:
    """A task's identity: its environment (empty for imports that name none) and its external id."""
    return (task.get("environment") or "", task["external_id"])


def _in_environment(environment: str) -> str:
    return f" of environment {environment!r}" if environment else ""


def _tasks_by_key(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Task]:
    by_environment: dict[str, list[str]] = {}
    for environment, ext in keys:
        by_environment.setdefault(environment, []).append(ext)
    found: dict[tuple[str, str], Task] = {}
    for environment, ids in by_environment.items():
        for task in Task.objects.filter(environment=environment, external_id__in=ids):
            found[(task.environment, task.external_id)] = task
    return found


class _Writer:
    """Buffers parsed trajectories and writes them a batch at a time."""

    def __init__(self, *, keep_ids: bool, origin: dict | None = None):
        self.origin = origin or {}  # import_batch or run: where a new trajectory came from
        self.buffer: list[tuple[int, ParsedTrajectory]] = []
        self.errors: list[dict] = []
        self.error_count = 0
        self.report = ImportReport()
        self.keep_ids = keep_ids
        self.policies: dict[tuple[str, str], Policy] = {}

    @property
    def unit(self) -> str:
        """What a numbered piece of the input is: a line of JSONL, or a record of one JSON document."""
        return "record" if self.report.layout == "document" else "line"

    def error(self, line: int, reason: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            # Where: the file's line, and for a record of a JSON document its number too.
            self.errors.append({**position_fields(line), "error": reason})

    def add(self, line: int, parsed: ParsedTrajectory) -> None:
        for kind, n in parsed.dropped.items():
            self.report.dropped[kind] = self.report.dropped.get(kind, 0) + n
        self.buffer.append((line, parsed))
        if len(self.buffer) >= BATCH_SIZE:
            self.flush()

    def _tasks(self) -> dict[tuple[str, str], Task]:
        """The buffer's tasks by (environment, external id): a task belongs to its environment, so
        two environments may each have a `cat-001`."""
        first: dict[tuple[str, str], ParsedTrajectory] = {}
        for line, p in self.buffer:
            key = task_key(p.task)
            if key in first and first[key].task["prompt"] != p.task["prompt"]:
                self.error(
                    line,
                    f"task {key[1]!r}{_in_environment(key[0])} appears earlier in this input with a different prompt",
                )
            first.setdefault(key, p)
        tasks = _tasks_by_key(first)
        missing = [
            Task(
                external_id=ext,
                prompt=p.task["prompt"],
                environment=environment,
                reference_answer=p.task.get("reference_answer", ""),
                split=p.task.get("split", Task.Split.TRAIN),
                metadata=p.task.get("metadata", {}),
            )
            for (environment, ext), p in first.items()
            if (environment, ext) not in tasks
        ]
        if missing:
            Task.objects.bulk_create(missing, ignore_conflicts=True)
            tasks = _tasks_by_key(first)
            # The labeling screen shows an environment's tools; a worker describes one not seen yet.
            environments_describe_missing({task.environment for task in missing})
        for line, p in self.buffer:
            task = tasks[task_key(p.task)]
            if task.prompt != p.task["prompt"]:
                self.error(
                    line,
                    f"task {task.external_id!r}{_in_environment(task.environment)} already exists with "
                    "a different prompt (a task's id names one prompt in its environment)",
                )
        return tasks

    def _policy(self, agent: dict[str, str]) -> Policy:
        key = (agent["name"], agent.get("version", ""))
        if key not in self.policies:
            self.policies[key], _ = Policy.objects.get_or_create(name=key[0], version=key[1])
        return self.policies[key]

    def flush(self) -> None:
        if not self.buffer:
            return
        tasks = self._tasks()
        hashes = [p.content_hash for _, p in self.buffer]
        existing = dict(Trajectory.objects.filter(content_hash__in=hashes).values_list("content_hash", "id"))
        new: dict[str, Trajectory] = {}
        for _, p in self.buffer:
            if p.content_hash in existing or p.content_hash in new:
                self.report.duplicates += 1
                continue
            task = tasks[task_key(p.task)]
            new[p.content_hash] = Trajectory(
                task=task,
                policy=self._policy(p.agent),
                steps=p.steps,
                answer=p.answer,
                source=Trajectory.Source.IMPORTED,
                outcome=p.outcome,
                content_hash=p.content_hash,
                behaviour_hash=p.behaviour_hash,
                num_steps=len(p.steps),
                metadata=p.metadata,
                **self.origin,
            )
        inserted = self._insert(list(new.values()))
        # Rows another import stored at the same moment count as already stored.
        self.report.duplicates += len(new) - len(inserted)
        self.report.created += len(inserted)
        if self.keep_ids:
            ids = dict(Trajectory.objects.filter(content_hash__in=hashes).values_list("content_hash", "id"))
            self.report.trajectory_ids.extend(ids[h] for h in hashes)
        self.buffer.clear()

    def _insert(self, trajectories: list[Trajectory]) -> list:
        """Store the trajectories whose content hash is not stored yet (another import may store
        some at the same moment); returns what was inserted.

        On PostgreSQL the rows go in by COPY and one INSERT ... SELECT ... ON CONFLICT DO NOTHING
        (webapp/db.py `insert_new_rows`), the JSON columns written by `json.dumps` once: Django's
        `bulk_create` sent them as arrays whose every element psycopg escaped by a regular
        expression, half the import's database time (benchmarks/RESULTS.md, issue 56). SQLite:
        `bulk_create`, with the same rule for a key stored meanwhile."""
        if connection.vendor != "postgresql":
            return bulk_create_new(
                Trajectory,
                trajectories,
                key=lambda t: t.content_hash,
                batch_size=BATCH_SIZE,
                stored_keys=lambda keys: Trajectory.objects.filter(content_hash__in=keys).values_list(
                    "content_hash", flat=True
                ),
            )
        if not trajectories:
            return []
        rows = (
            (
                t.task_id,
                t.policy_id,
                json.dumps(t.steps),
                t.answer,
                t.source,
                None if t.outcome is None else json.dumps(t.outcome),
                t.content_hash,
                t.behaviour_hash,
                t.num_steps,
                json.dumps(t.metadata),
            )
            for t in trajectories
        )
        return insert_new_rows(
            Trajectory,
            _COPIED_FIELDS,
            rows,
            constants={f"{name}_id": origin.pk for name, origin in self.origin.items()},
            conflict=("content_hash",),
            returning="content_hash",
        )

    def finish(self, *, campaign: Campaign | None) -> ImportReport:
        self.flush()
        if self.error_count:
            shown = len(self.errors)
            more = f" (the first {shown} are listed)" if shown < self.error_count else ""
            raise ImportRejected(
                f"Nothing was imported: {self.error_count} bad {self.unit}(s){more}"
                + (
                    " of the JSON document (numbered from 1 in the order they come, each with the line it starts on)."
                    if self.unit == "record"
                    else "."
                ),
                details=self.errors,
                error_count=self.error_count,
            )
        if campaign is not None and self.report.trajectory_ids:
            # Every trajectory of the input, new or already stored, is paired in the campaign.
            self.report.comparisons_created = comparisons_build(
                campaign=campaign, trajectory_ids=sorted(set(self.report.trajectory_ids))
            )
        return self.report


def _with_format(lines: Iterator[tuple[int, Any]], format: str, text: bool) -> tuple[str, Iterator[tuple[int, Any]]]:
    """The format to read `lines` as: a trace format is detected once, from the first record
    (its records belong together); the others are detected line by line ("auto")."""
    if format != "auto":
        return format, lines
    peeked = []
    for number, raw in lines:
        peeked.append((number, raw))
        if not text or raw.strip():
            break
    kind = None
    if peeked:
        first = peeked[-1][1]
        try:
            kind = detect_trace_format(json_input.loads(first) if text else first)
        except json_input.JsonInputError:
            pass  # reported with its line by the reading below
    return kind or "auto", itertools.chain(peeked, lines)


def _read_into(
    writer: _Writer,
    lines: Iterator[tuple[int, Any]],
    format: str,
    limits: Limits,
    *,
    text: bool,
    partial_traces: bool = False,
) -> None:
    """Parse every line (`text`: JSONL lines; else decoded objects), or every trace of a trace
    export, into the writer; bad ones are noted."""
    format, lines = _with_format(lines, format, text)

    def counted():
        for number, raw in lines:
            writer.report.lines_read = number
            if isinstance(raw, TooLong):
                writer.error(number, raw.reason())
                continue
            if text and not raw.strip():
                continue
            yield number, raw

    if format in TRACE_FORMATS or format == "otlp":
        for result in read_traces(counted(), format, text=text, partial=partial_traces):
            if result.error:
                writer.error(result.line, result.error)
            elif result.skipped:
                writer.report.dropped["trace_without_agent_run"] = (
                    writer.report.dropped.get("trace_without_agent_run", 0) + 1
                )
            for kind, n in result.passed_over.items():
                writer.report.dropped[kind] = writer.report.dropped.get(kind, 0) + n
            for canonical, dropped in result.trajectories:
                try:
                    parsed = parse_trajectory(canonical, limits, "canonical")
                except TrajectoryFormatError as exc:
                    writer.error(result.line, f"trace {result.trace[:80]!r}: {exc}")
                    continue
                parsed.dropped = dropped
                writer.add(result.line, parsed)
        return
    for number, raw in counted():
        try:
            parsed = parse_line(raw, limits, format) if text else parse_trajectory(raw, limits, format)
        except TrajectoryFormatError as exc:
            writer.error(number, str(exc))
            continue
        writer.add(number, parsed)


@transaction.atomic
def trajectories_import_stream(
    *,
    stream: BinaryIO | Iterable[bytes],
    campaign: Campaign | None = None,
    batch: ImportBatch | None = None,
    format: str = "auto",
    partial_traces: bool = False,
) -> ImportReport:
    """Import JSONL (one trajectory per line in a transcript format, or a trace export). All or nothing.

    `partial_traces`: a trace whose records name a parent missing from the file is imported (marked
    `metadata.partial_trace`) instead of refusing the file.

    With a campaign, the input's trajectories (new or already stored) are paired in it.
    `format` ("auto" or one of `IMPORT_FORMATS`) applies to the whole input.
    """
    writer = _Writer(keep_ids=campaign is not None, origin={"import_batch": batch} if batch else None)
    layout, numbered = records(stream, max_line=settings.IMPORT_MAX_LINE_BYTES)
    writer.report.layout = layout
    try:
        _read_into(writer, numbered, format, _limits(), text=True, partial_traces=partial_traces)
    except DocumentError as exc:
        raise ArbiterError(f"Nothing was imported: {exc} (after record {writer.report.lines_read}).") from None
    report = writer.finish(campaign=campaign)
    if report.created == 0 and report.duplicates == 0:
        raise ArbiterError("Nothing was imported: the input holds no trajectories." + report.dropped_note())
    return report


@transaction.atomic
def trajectories_import_objects(
    *,
    objects: list[Any],
    campaign: Campaign | None = None,
    run=None,
    format: str = "auto",
    partial_traces: bool = False,
) -> ImportReport:
    """Import decoded objects (the API's body, a rollout run's episodes). `trajectory_ids`
    follows the input order (trace by trace for a trace export); `run` is recorded on the new rows."""
    if not objects:
        raise ArbiterError("Nothing was imported: the list is empty.")
    writer = _Writer(keep_ids=True, origin={"run": run} if run else None)
    _read_into(writer, enumerate(objects, start=1), format, _limits(), text=False, partial_traces=partial_traces)
    report = writer.finish(campaign=campaign)
    if report.created == 0 and report.duplicates == 0:
        raise ArbiterError("Nothing was imported: the input holds no trajectories." + report.dropped_note())
    return report


# Uploaded files: small ones are imported in the request, large ones by a job.


def import_upload_create(
    *,
    upload,
    campaign: Campaign | None,
    created_by,
    format: str = "auto",
    partial_traces: bool = False,
) -> ImportBatch:
    """Store an uploaded JSONL file and import it now (small) or queue a job (large)."""
    if upload.size > settings.IMPORT_MAX_UPLOAD_BYTES:
        raise ArbiterError(
            f"The file is {upload.size:,} bytes, over the upload limit of "
            f"{settings.IMPORT_MAX_UPLOAD_BYTES:,} bytes (IMPORT_MAX_UPLOAD_BYTES)."
        )
    settings.UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
    stored = settings.UPLOAD_DIR / f"{uuid.uuid4().hex}.jsonl"
    with stored.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    batch = ImportBatch.objects.create(
        filename=Path(upload.name or "upload.jsonl").name[:300],
        stored_path=str(stored),
        size_bytes=upload.size,
        campaign=campaign,
        created_by=created_by,
        format=format,
        partial_traces=partial_traces,
    )
    return job_dispatch(
        batch,
        inline=upload.size <= settings.IMPORT_INLINE_MAX_BYTES,
        run=lambda pk: import_batch_run(batch_id=pk),
        task="annotate.import_batch",
    )


def import_batch_run(*, batch_id: int) -> None:
    """Run a stored import (a job: webapp/jobs.py). Claimed once; the import itself is one transaction."""
    if not job_claim(ImportBatch, batch_id):
        return
    batch = ImportBatch.objects.select_related("campaign").get(pk=batch_id)
    try:
        with Heartbeat(ImportBatch, batch.pk), open(batch.stored_path, "rb") as stream:
            report = trajectories_import_stream(
                stream=stream,
                campaign=batch.campaign,
                batch=batch,
                format=batch.format,
                partial_traces=batch.partial_traces,
            )
    except ArbiterError as exc:
        _import_batch_finish(
            batch,
            status=ImportBatch.Status.FAILED,
            message=exc.message,
            errors=exc.details,
            error_count=getattr(exc, "error_count", len(exc.details)),
        )
        return
    except Exception as exc:
        log.exception("import %s failed", batch.pk)
        _import_batch_finish(
            batch, status=ImportBatch.Status.FAILED, message=f"The import failed: {type(exc).__name__}: {exc}"
        )
        raise
    _import_batch_finish(
        batch,
        status=ImportBatch.Status.SUCCEEDED,
        message=(
            f"Imported {report.created} trajectories ({report.duplicates} already stored)"
            + (f", {report.comparisons_created} comparisons built." if batch.campaign else ".")
            + report.dropped_note()
        ),
        report=report,
    )


def _import_batch_finish(
    batch: ImportBatch,
    *,
    status: str,
    message: str,
    errors: list | None = None,
    error_count: int = 0,
    report: ImportReport | None = None,
) -> None:
    """Write the outcome (job_finish: over a sweep's failure too, since what the import did is
    committed: a heartbeat held up by a locked SQLite file must not make it look lost)."""
    counts = (
        {}
        if report is None
        else {
            "lines_read": report.lines_read,
            "created_count": report.created,
            "duplicate_count": report.duplicates,
            "comparisons_created": report.comparisons_created,
            "dropped": dict(report.dropped),
            "layout": report.layout,
        }
    )
    job_finish(
        ImportBatch,
        batch.pk,
        status=status,
        message=message,
        error=message if status == ImportBatch.Status.FAILED else "",
        errors=errors or [],
        error_count=error_count,
        **counts,
    )
    Path(batch.stored_path).unlink(missing_ok=True)


IMPORT_STALE_REASON = "The worker stopped before the import finished; nothing was imported. Upload the file again."
