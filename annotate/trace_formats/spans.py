"""OpenTelemetry spans as plain dicts, whichever JSON they were exported as, and their tree.

Plain Python, no Django. Two exports are read, one JSON object per line:

- **OTLP JSON** (the OpenTelemetry Collector's file exporter, `otlp/http` with JSON):
  `{"resourceSpans": [{"resource": {"attributes": [...]}, "scopeSpans": [{"scope": {...},
  "spans": [...]}]}]}`, attributes as `[{"key", "value": {"stringValue" | "intValue" |
  "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue" | "bytesValue"}}]`, times in
  nanoseconds (`startTimeUnixNano`), ids as hex strings.
- **A span per line** (the SDK's console exporter, Phoenix's span export): `{"name",
  "context": {"trace_id", "span_id"}, "parent_id", "start_time", "end_time" (ISO 8601),
  "attributes": {...}, "events": [...], "status": {...}}`. Nested attribute objects are
  flattened to dotted keys (`{"llm": {"input_messages": [{"message": {...}}]}}` becomes
  `llm.input_messages.0.message.role`), so both exports look the same to a converter.

Every span becomes `{"trace_id", "span_id", "parent_id", "name", "start", "end" (ns),
"attributes" (flat), "events" [{"name", "time", "attributes"}], "status" {"code": "OK" |
"ERROR" | "UNSET", "message"}, "resource" (flat)}`. `execution_order` walks one trace's
spans as they ran: from the roots, children by start time (then file order), depth first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any

from annotate.trajectory_formats import TrajectoryFormatError
from core.ids import ascii_digits

STATUS_NAMES = {
    0: "UNSET",
    1: "OK",
    2: "ERROR",
    "STATUS_CODE_UNSET": "UNSET",
    "STATUS_CODE_OK": "OK",
    "STATUS_CODE_ERROR": "ERROR",
    "UNSET": "UNSET",
    "OK": "OK",
    "ERROR": "ERROR",
}


def is_otlp(obj: Any) -> bool:
    return isinstance(obj, dict) and ("resourceSpans" in obj or "resource_spans" in obj)


def is_span_json(obj: Any) -> bool:
    """One span per line: a span context (`context.trace_id`) or OTLP-style ids at the top."""
    if not isinstance(obj, dict):
        return False
    context = obj.get("context")
    return (isinstance(context, dict) and "trace_id" in context and "span_id" in context) or (
        "traceId" in obj and "spanId" in obj and "name" in obj
    )


# Values ------------------------------------------------------------------------------------


def any_value(value: Any, where: str) -> Any:
    """An OTLP AnyValue as the plain value it holds."""
    if not isinstance(value, dict):
        raise TrajectoryFormatError(f'{where}: expected an AnyValue object such as {{"stringValue": ...}}')
    if not value:
        return None
    if "stringValue" in value:
        return _typed(value["stringValue"], str, where)
    if "boolValue" in value:
        return _typed(value["boolValue"], bool, where)
    if "intValue" in value:
        raw = value["intValue"]
        try:
            return int(raw) if isinstance(raw, (int, str)) and not isinstance(raw, bool) else _bad(where, "intValue")
        except ValueError:
            raise TrajectoryFormatError(f"{where}.intValue: {str(raw)[:40]!r} is not an integer") from None
    if "doubleValue" in value:
        raw = value["doubleValue"]
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            _bad(where, "doubleValue")
        try:
            return float(raw)
        except ValueError:
            raise TrajectoryFormatError(f"{where}.doubleValue: {str(raw)[:40]!r} is not a number") from None
    if "bytesValue" in value:
        return _typed(value["bytesValue"], str, where)
    if "arrayValue" in value:
        values = (value["arrayValue"] or {}).get("values", []) if isinstance(value["arrayValue"], dict) else None
        if not isinstance(values, list):
            _bad(where, "arrayValue")
        return [any_value(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    if "kvlistValue" in value:
        values = (value["kvlistValue"] or {}).get("values", []) if isinstance(value["kvlistValue"], dict) else None
        if not isinstance(values, list):
            _bad(where, "kvlistValue")
        return key_values(values, f"{where}.kvlistValue.values")
    raise TrajectoryFormatError(f"{where}: unknown AnyValue {', '.join(map(str, value))[:60]!r}")


def _typed(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise TrajectoryFormatError(f"{where}: expected a {kind.__name__}, got {type(value).__name__}")
    return value


def _bad(where: str, field: str):
    raise TrajectoryFormatError(f"{where}.{field}: not a valid {field}")


def key_values(items: Any, where: str) -> dict[str, Any]:
    """OTLP `[{"key", "value"}]` as a dict."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise TrajectoryFormatError(f"{where}: expected a list of {{key, value}}")
    out = {}
    for i, item in enumerate(items):
        if type(item) is dict:  # the common case first: a string attribute, checked without building `where`
            key, value = item.get("key"), item.get("value")
            if type(key) is str and type(value) is dict and len(value) == 1 and type(value.get("stringValue")) is str:
                out[key] = value["stringValue"]
                continue
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise TrajectoryFormatError(f'{where}[{i}]: expected {{"key": ..., "value": ...}}')
        out[item["key"]] = any_value(item.get("value", {}), f"{where}[{i}].value")
    return out


def flatten(attributes: Any, where: str) -> dict[str, Any]:
    """Nested attribute objects as dotted keys; lists of objects get their index as a key part."""
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise TrajectoryFormatError(f"{where}: expected an object of attributes")
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, inner in enumerate(value):
                walk(f"{prefix}.{i}", inner)
        else:
            out[prefix] = value

    walk("", attributes)
    return out


def _nanos(value: Any, where: str, required: bool = True) -> int | None:
    """Unix nanoseconds from an integer (or its string) or an ISO 8601 time."""
    if value is None or value == "":
        if required:
            raise TrajectoryFormatError(f"{where}: the span has no start time")
        return None
    if isinstance(value, bool):
        raise TrajectoryFormatError(f"{where}: expected a time, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        return int(value) if ascii_digits(value) else iso_nanos(value, where)
    raise TrajectoryFormatError(f"{where}: expected a time, got {type(value).__name__}")


def iso_nanos(value: Any, where: str) -> int:
    """Unix nanoseconds of an ISO 8601 time; one without an offset is UTC (as tracing tools write it)."""
    if not isinstance(value, str):
        raise TrajectoryFormatError(f"{where}: expected an ISO 8601 time, got {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TrajectoryFormatError(f"{where}: {value[:40]!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _id(value: Any, where: str, required: bool = True) -> str | None:
    if value in (None, "") and not required:
        return None
    if not isinstance(value, str) or not value:
        raise TrajectoryFormatError(f"{where}: expected the id as a non-empty string")
    return value.lower().removeprefix("0x")


def _status(code: Any, message: Any) -> dict[str, str]:
    if code is None:
        return {"code": "UNSET", "message": message if isinstance(message, str) else ""}
    name = None
    if isinstance(code, str):
        name = STATUS_NAMES.get(code.upper())
    elif isinstance(code, int) and not isinstance(code, bool):
        name = STATUS_NAMES.get(code)
    if name is None:
        raise TrajectoryFormatError(
            f"status code {str(code)[:40]!r} is not one of 0, 1, 2, UNSET, OK, ERROR (or STATUS_CODE_...)"
        )
    return {"code": name, "message": message if isinstance(message, str) else ""}


# The two exports --------------------------------------------------------------------------


def otlp_spans(obj: dict) -> Iterator[dict]:
    """The spans of one OTLP JSON line (an ExportTraceServiceRequest)."""
    resource_spans = obj.get("resourceSpans", obj.get("resource_spans"))
    if not isinstance(resource_spans, list):
        raise TrajectoryFormatError("resourceSpans: expected a list")
    for r, rs in enumerate(resource_spans):
        where = f"resourceSpans[{r}]"
        if not isinstance(rs, dict):
            raise TrajectoryFormatError(f"{where}: expected an object")
        resource = rs.get("resource") or {}
        if not isinstance(resource, dict):
            raise TrajectoryFormatError(f"{where}.resource: expected an object")
        resource_attributes = key_values(resource.get("attributes"), f"{where}.resource.attributes")
        scope_spans = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", []))
        if not isinstance(scope_spans, list):
            raise TrajectoryFormatError(f"{where}.scopeSpans: expected a list")
        for s, ss in enumerate(scope_spans):
            swhere = f"{where}.scopeSpans[{s}]"
            spans = ss.get("spans", []) if isinstance(ss, dict) else None
            if not isinstance(spans, list):
                raise TrajectoryFormatError(f"{swhere}.spans: expected a list")
            for i, span in enumerate(spans):
                yield _otlp_span(span, f"{swhere}.spans[{i}]", resource_attributes)


def _otlp_span(span: Any, where: str, resource: dict) -> dict:
    if not isinstance(span, dict):
        raise TrajectoryFormatError(f"{where}: expected a span object")
    events = span.get("events") or []
    if not isinstance(events, list):
        raise TrajectoryFormatError(f"{where}.events: expected a list")
    status = span.get("status") or {}
    if not isinstance(status, dict):
        raise TrajectoryFormatError(f"{where}.status: expected an object")
    name = span.get("name", "")
    if not isinstance(name, str):
        raise TrajectoryFormatError(f"{where}.name: expected a string")
    return {
        "trace_id": _id(span.get("traceId"), f"{where}.traceId"),
        "span_id": _id(span.get("spanId"), f"{where}.spanId"),
        "parent_id": _id(span.get("parentSpanId"), f"{where}.parentSpanId", required=False),
        "name": name,
        "start": _nanos(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
        "end": _nanos(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano", required=False),
        "attributes": key_values(span.get("attributes"), f"{where}.attributes"),
        "events": [
            {
                "name": _typed(e.get("name", ""), str, f"{where}.events[{j}].name")
                if isinstance(e, dict)
                else _bad(f"{where}.events[{j}]", "event"),
                "time": _nanos(e.get("timeUnixNano"), f"{where}.events[{j}].timeUnixNano", required=False),
                "attributes": key_values(e.get("attributes"), f"{where}.events[{j}].attributes"),
            }
            for j, e in enumerate(events)
        ],
        "status": _status(status.get("code"), status.get("message")),
        "resource": resource,
    }


def json_span(obj: dict) -> dict:
    """One span exported as a JSON object of its own (console exporter, Phoenix)."""
    context = obj.get("context") if isinstance(obj.get("context"), dict) else {}
    status = obj.get("status")
    if isinstance(status, dict):
        code, message = status.get("status_code", status.get("code")), status.get("description", status.get("message"))
    else:
        code, message = obj.get("status_code", status), obj.get("status_message")
    if isinstance(code, str):
        code = code.upper().removeprefix("STATUSCODE.")
    events = obj.get("events") or []
    if not isinstance(events, list):
        raise TrajectoryFormatError("events: expected a list")
    name = obj.get("name", "")
    if not isinstance(name, str):
        raise TrajectoryFormatError("name: expected a string")
    resource = obj.get("resource") or {}
    if isinstance(resource, dict) and isinstance(resource.get("attributes"), dict):
        resource = resource["attributes"]
    attributes = flatten(obj.get("attributes"), "attributes")
    if isinstance(obj.get("span_kind"), str) and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = obj["span_kind"]  # Phoenix keeps the kind beside
    return {
        "trace_id": _id(context.get("trace_id", obj.get("traceId")), "context.trace_id"),
        "span_id": _id(context.get("span_id", obj.get("spanId")), "context.span_id"),
        "parent_id": _id(obj.get("parent_id", obj.get("parentSpanId")), "parent_id", required=False),
        "name": name,
        "start": _nanos(obj.get("start_time", obj.get("startTimeUnixNano")), "start_time"),
        "end": _nanos(obj.get("end_time", obj.get("endTimeUnixNano")), "end_time", required=False),
        "attributes": attributes,
        "events": [
            {
                "name": _typed(e.get("name", ""), str, f"events[{j}].name")
                if isinstance(e, dict)
                else _bad(f"events[{j}]", "event"),
                "time": _nanos(e.get("timestamp", e.get("timeUnixNano")), f"events[{j}].timestamp", required=False),
                "attributes": flatten(e.get("attributes"), f"events[{j}].attributes"),
            }
            for j, e in enumerate(events)
        ],
        "status": _status(code, message),
        "resource": flatten(resource, "resource") if isinstance(resource, dict) else {},
    }


def span_records(obj: Any) -> Iterator[tuple[str, dict]]:
    """(trace id, span) for each span of one line, OTLP JSON or a span per line."""
    if is_otlp(obj):
        for span in otlp_spans(obj):
            yield span["trace_id"], span
    elif is_span_json(obj):
        span = json_span(obj)
        yield span["trace_id"], span
    else:
        raise TrajectoryFormatError(
            'not a span: expected an OTLP JSON export ({"resourceSpans": [...]}) or one span per line '
            '({"context": {"trace_id", "span_id"}, ...})'
        )


# The tree ---------------------------------------------------------------------------------

# The records whose parent no record of the file holds, while partial traces are allowed
# (`partial_traces`); None (the default) refuses them.
_DANGLING: ContextVar[list | None] = ContextVar("dangling_parents", default=None)


@contextmanager
def partial_traces():
    """Within it, a record whose parent is missing (a partial export) is read as a root and
    listed in the list it yields, instead of refusing its trace."""
    found: list[str] = []
    token = _DANGLING.set(found)
    try:
        yield found
    finally:
        _DANGLING.reset(token)


def execution_order(spans: list[dict]) -> list[dict]:
    """One trace's spans as they ran: roots by start time, each followed by its subtree.

    A span (run, observation) that names a parent no record of the file holds is a broken
    export: its trace is refused, naming it, unless partial traces are allowed
    (`partial_traces`), when it is read as a root. Duplicate span ids and cycles are refused."""
    by_id: dict[str, dict] = {}
    for span in spans:
        if span["span_id"] in by_id:
            raise TrajectoryFormatError(f"span id {span['span_id']!r} appears twice in trace {span['trace_id']!r}")
        by_id[span["span_id"]] = span
    for span in spans:
        parent = span.get("parent_id")
        if parent and parent not in by_id:
            what = span.get("where") or f"span {span['span_id']!r} ({span.get('name', '')!s:.60})"
            dangling = _DANGLING.get()
            if dangling is None:
                raise TrajectoryFormatError(
                    f"{what} names the parent {str(parent)[:80]!r}, which no record of the file holds: a partial "
                    "export. Export the whole trace, or import partial traces on purpose (--partial-traces, the "
                    'upload\'s "partial traces" box, partial_traces=true); they are then marked partial.'
                )
            dangling.append(str(parent))
    order = {id(span): i for i, span in enumerate(spans)}
    children: dict[str | None, list[dict]] = {}
    for span in spans:
        parent = span["parent_id"] if span["parent_id"] in by_id else None
        children.setdefault(parent, []).append(span)
    for group in children.values():
        group.sort(key=lambda s: (s["start"], order[id(s)]))
    out: list[dict] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        span = stack.pop()
        out.append(span)
        stack.extend(reversed(children.get(span["span_id"], [])))
    if len(out) != len(spans):
        raise TrajectoryFormatError(f"the spans of trace {spans[0]['trace_id']!r} form a cycle (no root)")
    return out


def descendants(span: dict, spans_in_order: list[dict]) -> list[dict]:
    """The spans under `span`, in execution order (`spans_in_order` from `execution_order`)."""
    inside = {span["span_id"]}
    out = []
    for other in spans_in_order:
        if other["parent_id"] in inside and other["span_id"] not in inside:
            inside.add(other["span_id"])
            out.append(other)
    return out
