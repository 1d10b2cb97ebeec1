"""OpenInference spans for the import benchmark: one trace per `make_line` trajectory.

`trace_lines(i, n_tasks)` gives one OTLP JSON line (an ExportTraceServiceRequest, as the
OpenTelemetry Collector's file exporter writes it) holding one agent run instrumented with
OpenInference: an AGENT span, a model call (LLM span) per round with the growing message
history as `llm.input_messages`, and a TOOL span per `search`. Imported with
`--format openinference`, it is exactly the 10 steps of `make_line(i, n_tasks)` in
benchmarks/import_trajectories.py (the answer's `quotes` aside: a trace has none). The tool
calls carry no `tool_call.id` (as some instrumentations write them), so the steps carry no
`call_id`, as make_line's do not.
"""

from __future__ import annotations

import json

BASE_NS = 1_763_632_800_000_000_000


def _value(value) -> dict:
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def _attributes(attributes: dict) -> list[dict]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _messages(prefix: str, messages: list[dict]) -> dict:
    out = {}
    for n, message in enumerate(messages):
        for key, value in message.items():
            out[f"{prefix}.{n}.message.{key}"] = value
    return out


def _span(trace_id: str, span_id: str, parent: str | None, name: str, start_ms: int, attributes: dict) -> dict:
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(BASE_NS + start_ms * 1_000_000),
        "endTimeUnixNano": str(BASE_NS + (start_ms + 5) * 1_000_000),
        "attributes": _attributes(attributes),
        "status": {"code": 1},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def trace_lines(i: int, n_tasks: int) -> list[str]:
    entity = i % n_tasks
    trace_id, agent_id = f"{i + 1:032x}", f"{i + 1:08x}{0:08x}"
    prompt = f"Who founded entity {entity}?"
    history = [{"role": "user", "content": prompt}]
    model = {"openinference.span.kind": "LLM", "llm.model_name": "bench-model", "llm.provider": "openai"}
    spans = []
    for s in range(3):
        call = {
            "role": "assistant",
            "content": f"Step {s}: I should look up entity {entity} and check the dates.",
            "tool_calls.0.tool_call.function.name": "search",
            "tool_calls.0.tool_call.function.arguments": json.dumps({"query": f"entity {entity} founder {s}"}),
        }
        spans.append(
            _span(
                trace_id,
                f"{i + 1:08x}{2 * s + 1:08x}",
                agent_id,
                "ChatCompletion",
                100 * s + 10,
                {**model, **_messages("llm.input_messages", history), **_messages("llm.output_messages", [call])},
            )
        )
        result = " ".join(
            f"[{k}] Result {k} for run {i}: a fictional article about place {k * 7 + s}." for k in range(8)
        )
        spans.append(
            _span(
                trace_id,
                f"{i + 1:08x}{2 * s + 2:08x}",
                agent_id,
                "search",
                100 * s + 50,
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": "search",
                    "input.value": json.dumps({"query": f"entity {entity} founder {s}"}),
                    "input.mime_type": "application/json",
                    "output.value": result,
                },
            )
        )
        history = history + [call, {"role": "tool", "name": "search", "content": result}]
    spans.append(
        _span(
            trace_id,
            f"{i + 1:08x}{7:08x}",
            agent_id,
            "ChatCompletion",
            310,
            {
                **model,
                **_messages("llm.input_messages", history),
                **_messages("llm.output_messages", [{"role": "assistant", "content": f"Person {i}"}]),
            },
        )
    )
    spans.insert(
        0,
        _span(
            trace_id,
            agent_id,
            None,
            "bench-agent",
            0,
            {
                "openinference.span.kind": "AGENT",
                "agent.name": "bench-agent",
                "input.value": prompt,
                "output.value": f"Person {i}",
            },
        ),
    )
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes({"service.name": "bench-service", "service.version": str(i % 3)})
                },
                "scopeSpans": [{"scope": {"name": "openinference.instrumentation.openai"}, "spans": spans}],
            }
        ]
    }
    return [json.dumps(request)]
