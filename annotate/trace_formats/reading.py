"""Reading a trace export: lines to records, records grouped by trace, traces converted.

Plain Python, no Django. `read_traces(lines, format)` yields, for each line that could not
be read and for each trace, a `TraceResult`: the trace's canonical objects (one per agent
run), the reason it was refused, or that it holds no agent run (a converter returned
nothing: counted, never stored), with the line of its first record. The import
(annotate/services/imports.py) checks and stores the objects like any other trajectory.

Formats: "otel" (OpenTelemetry GenAI spans), "openinference" (OpenInference spans),
"langsmith" (LangSmith runs), "langfuse" (Langfuse traces and observations). OTLP exports
carry both span conventions; detected as "otlp", each trace is then read as OpenInference
when its spans carry `openinference.span.kind`, else as GenAI.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from annotate.trace_formats import spans
from annotate.trace_formats.grouping import TraceGroups
from annotate.trajectory_formats import DROPPED_REASONS, FORMATS, TrajectoryFormatError
from core import json_input

log = logging.getLogger(__name__)

MODULES = {
    "otel": "annotate.trace_formats.otel_genai",
    "openinference": "annotate.trace_formats.openinference",
    "langsmith": "annotate.trace_formats.langsmith",
    "langfuse": "annotate.trace_formats.langfuse",
}
TRACE_FORMATS = tuple(MODULES)
IMPORT_FORMATS = FORMATS + TRACE_FORMATS
"""Every `--format` value: auto, the transcript formats (a trajectory per line) and the trace formats."""


def module(name: str) -> ModuleType:
    return importlib.import_module(MODULES[name])


def dropped_reason(kind: str) -> str:
    """The sentence for a kind of content left out on purpose (each format module lists its own)."""
    if kind in DROPPED_REASONS:
        return DROPPED_REASONS[kind]
    for name in TRACE_FORMATS:
        reasons = getattr(module(name), "DROPPED_REASONS", {})
        if kind in reasons:
            return reasons[kind]
    return f"{kind.replace('_', ' ')} (left out)"


@dataclass
class TraceResult:
    line: int
    trace: str = ""
    trajectories: list[tuple[dict, dict[str, int]]] = field(default_factory=list)
    error: str = ""
    # Parts of the trace that are no episode, passed over and counted (a partial export's orphaned
    # tool runs): a converter returns them as (None, {kind: count}).
    passed_over: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    """The trace holds no agent run of this format (an export also has a web server's spans, say):
    nothing of it is stored, and the import reports how many such traces it passed over."""


def detect_trace_format(obj: Any) -> str | None:
    """The trace format one decoded line is in ("otlp" for either span convention), or None."""
    if not isinstance(obj, dict):
        return None
    if spans.is_otlp(obj) or spans.is_span_json(obj):
        return "otlp"
    for name in ("openinference", "langsmith", "langfuse"):  # openinference: Phoenix's dataframe rows
        if module(name).looks_like(obj):
            return name
    return None


class _Otlp:
    """Both span conventions: the records are the same spans, the reading is per trace."""

    NAME = "otlp"

    @staticmethod
    def records(obj: Any):
        return spans.span_records(obj)

    @staticmethod
    def convert(records: list[tuple[int, Any]]):
        trace_spans = [span for _, span in records]
        chosen = module("openinference") if module("openinference").claims(trace_spans) else module("otel")
        return chosen.convert(records)


# A converter names every shape it refuses; one it did not foresee still ends as a refusal
# with the technical reason, never as a failed request (and is logged, to be named next time).
UNEXPECTED = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)


def _unexpected(exc: Exception) -> str:
    log.warning("trace import: unforeseen record shape", exc_info=exc)
    return (
        f"a record of a shape this format does not have ({type(exc).__name__}: {str(exc)[:200]}); nothing was imported"
    )


def _reader(name: str):
    return _Otlp if name == "otlp" else module(name)


def _convert(reader: ModuleType, records: list, partial: bool) -> list:
    if not partial:
        return reader.convert(records)
    with spans.partial_traces() as dangling:
        converted = reader.convert(records)
    if dangling:
        missing = sorted(set(dangling))
        for canonical, dropped in converted:
            if canonical is None:
                continue
            metadata = canonical.setdefault("metadata", {})
            metadata["partial_trace"] = {"missing_parents": missing[:20]}
            dropped["partial_trace"] = dropped.get("partial_trace", 0) + 1
    return converted


def read_traces(
    lines: Iterable[tuple[int, Any]], format: str, *, text: bool = True, partial: bool = False
) -> Iterator[TraceResult]:
    """`lines` are (line number, the line's bytes), or with `text=False` (line number, a decoded
    object); `format` a trace format or "otlp". With `partial`, a trace whose records name a
    parent that is not in the file is read (those records as roots) and its trajectories are
    marked `metadata.partial_trace`; without it such a trace is refused."""
    reader = _reader(format)
    with TraceGroups() as groups:
        for number, raw in lines:
            try:
                obj = json_input.loads(raw) if text else raw
                if not isinstance(obj, dict):
                    raise TrajectoryFormatError(f"expected a JSON object, got {type(obj).__name__}")
                for key, record in reader.records(obj):
                    if not isinstance(key, str) or not key:
                        raise TrajectoryFormatError("a record without its trace id")
                    groups.add(key, number, record)
            except (json_input.JsonInputError, TrajectoryFormatError) as exc:
                yield TraceResult(line=number, error=str(exc))
            except UNEXPECTED as exc:
                yield TraceResult(line=number, error=_unexpected(exc))
        for key, records in groups.traces():
            first = records[0][0]
            try:
                converted = _convert(reader, records, partial)
            except TrajectoryFormatError as exc:
                yield TraceResult(line=first, trace=key, error=f"trace {key[:80]!r}: {exc}")
                continue
            except UNEXPECTED as exc:
                yield TraceResult(line=first, trace=key, error=f"trace {key[:80]!r}: {_unexpected(exc)}")
                continue
            passed: dict[str, int] = {}
            for canonical, counts in converted:
                if canonical is None:
                    for kind, n in counts.items():
                        passed[kind] = passed.get(kind, 0) + n
            kept = [entry for entry in converted if entry[0] is not None]
            if not kept and not passed:
                yield TraceResult(line=first, trace=key, skipped=True)
                continue
            yield TraceResult(line=first, trace=key, trajectories=kept, passed_over=passed)
