"""Span readers (OTLP JSON, a span per line), the span tree, and grouping records by trace on disk."""

import pytest

from annotate.trace_formats import spans
from annotate.trace_formats.grouping import TraceGroups
from annotate.trajectory_formats import TrajectoryFormatError


def _kv(key, **value):
    return {"key": key, "value": value}


OTLP = {
    "resourceSpans": [
        {
            "resource": {"attributes": [_kv("service.name", stringValue="agent-svc")]},
            "scopeSpans": [
                {
                    "scope": {"name": "x"},
                    "spans": [
                        {
                            "traceId": "AB01",
                            "spanId": "02",
                            "parentSpanId": "01",
                            "name": "child",
                            "kind": 1,
                            "startTimeUnixNano": "2000",
                            "endTimeUnixNano": "3000",
                            "attributes": [
                                _kv("n", intValue="7"),
                                _kv("f", doubleValue=0.5),
                                _kv("b", boolValue=True),
                                _kv("list", arrayValue={"values": [{"stringValue": "a"}, {"intValue": 2}]}),
                                _kv("kv", kvlistValue={"values": [_kv("inner", stringValue="v")]}),
                            ],
                            "events": [
                                {"timeUnixNano": "2500", "name": "e", "attributes": [_kv("k", stringValue="v")]}
                            ],
                            "status": {"code": 2, "message": "boom"},
                        },
                        {
                            "traceId": "AB01",
                            "spanId": "01",
                            "name": "root",
                            "startTimeUnixNano": 1000,
                            "endTimeUnixNano": "4000",
                        },
                    ],
                }
            ],
        }
    ]
}


def test_otlp_json_spans_become_plain_dicts():
    child, root = list(spans.otlp_spans(OTLP))
    assert child["trace_id"] == "ab01" and child["parent_id"] == "01" and root["parent_id"] is None
    assert child["attributes"] == {"n": 7, "f": 0.5, "b": True, "list": ["a", 2], "kv": {"inner": "v"}}
    assert child["events"] == [{"name": "e", "time": 2500, "attributes": {"k": "v"}}]
    assert child["status"] == {"code": "ERROR", "message": "boom"}
    assert child["resource"] == {"service.name": "agent-svc"} and child["start"] == 2000


def test_a_span_per_line_is_read_the_same_way_with_nested_attributes_flattened():
    span = spans.json_span(
        {
            "name": "llm",
            "context": {"trace_id": "0xAB01", "span_id": "0x02"},
            "parent_id": "0x01",
            "start_time": "2026-01-01T00:00:00.000001Z",
            "end_time": "2026-01-01T00:00:01Z",
            "status": {"status_code": "ERROR", "description": "bad"},
            "span_kind": "LLM",
            "attributes": {
                "llm": {"input_messages": [{"message": {"role": "user", "content": "hi"}}]},
                "tags": ["a", "b"],
            },
            "events": [{"name": "exception", "timestamp": "2026-01-01T00:00:00.5Z", "attributes": {"x": 1}}],
            "resource": {"attributes": {"service.name": "s"}},
        }
    )
    assert span["trace_id"] == "ab01" and span["span_id"] == "02" and span["parent_id"] == "01"
    assert span["attributes"] == {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "tags": ["a", "b"],
        "openinference.span.kind": "LLM",
    }
    assert span["status"] == {"code": "ERROR", "message": "bad"}
    assert span["start"] == 1767225600000001000 and span["resource"] == {"service.name": "s"}


@pytest.mark.parametrize(
    "obj, reason",
    [
        ({"resourceSpans": {}}, "resourceSpans: expected a list"),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "1", "startTimeUnixNano": "1"}]}]}]},
            r"spans\[0\].traceId: expected the id",
        ),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "1", "spanId": "1"}]}]}]}, "no start time"),
        (
            {
                "resourceSpans": [
                    {"scopeSpans": [{"spans": [{"traceId": "1", "spanId": "1", "startTimeUnixNano": "soon"}]}]}
                ]
            },
            "not an ISO 8601 time",
        ),
        (
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "traceId": "1",
                                        "spanId": "1",
                                        "startTimeUnixNano": "1",
                                        "attributes": [{"key": "k", "value": {"intValue": "x"}}],
                                    }
                                ]
                            }
                        ]
                    }
                ]
            },
            "is not an integer",
        ),
        (
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "traceId": "1",
                                        "spanId": "1",
                                        "startTimeUnixNano": "1",
                                        "attributes": [{"key": "k", "value": {"mystery": 1}}],
                                    }
                                ]
                            }
                        ]
                    }
                ]
            },
            "unknown AnyValue",
        ),
        ({"name": "x"}, "not a span"),
    ],
)
def test_malformed_spans_are_refused_naming_the_place(obj, reason):
    with pytest.raises(TrajectoryFormatError, match=reason):
        list(spans.span_records(obj))


def _span(span_id, parent=None, start=0):
    return {"trace_id": "t", "span_id": span_id, "parent_id": parent, "start": start}


def test_execution_order_walks_the_tree_by_start_time_whatever_the_file_order():
    listed = [_span("c2", "r", 30), _span("g1", "c1", 15), _span("r", None, 0), _span("c1", "r", 10)]
    assert [s["span_id"] for s in spans.execution_order(listed)] == ["r", "c1", "g1", "c2"]
    ordered = spans.execution_order(listed)
    assert [s["span_id"] for s in spans.descendants(ordered[1], ordered)] == ["g1"]


def test_a_span_whose_parent_is_missing_refuses_its_trace_unless_partial_traces_are_asked_for():
    listed = [_span("r", None, 0), _span("orphan", "missing", 5)]
    with pytest.raises(TrajectoryFormatError, match="names the parent 'missing', which no record of the file holds"):
        spans.execution_order(listed)
    with spans.partial_traces() as dangling:
        assert [s["span_id"] for s in spans.execution_order(listed)] == ["r", "orphan"]
    assert dangling == ["missing"]


def test_duplicate_ids_and_cycles_are_refused():
    with pytest.raises(TrajectoryFormatError, match="appears twice"):
        spans.execution_order([_span("a"), _span("a")])
    with pytest.raises(TrajectoryFormatError, match="cycle"):
        spans.execution_order([_span("a", "b"), _span("b", "a")])


def test_groups_come_back_whole_in_order_of_first_appearance_and_the_file_is_removed():
    with TraceGroups() as groups:
        for line, key in enumerate(["b", "a", "b", "c", "a"], start=1):
            groups.add(key, line, {"line": line, "big": 10**30})
        out = list(groups.traces())
        path = groups.path
    assert [(k, [line for line, _ in records]) for k, records in out] == [("b", [1, 3]), ("a", [2, 5]), ("c", [4])]
    assert out[0][1][0][1] == {"line": 1, "big": 10**30}  # past 64 bits, exactly
    import os

    assert not os.path.exists(path)
