"""OpenTelemetry GenAI spans for the import benchmark: one trace per `make_line(i, n_tasks)`.

`trace_lines(i, n_tasks)` gives one OTLP JSON line (the Collector's file exporter: an
ExportTraceServiceRequest) holding the spans of one agent run, as the GenAI semantic
conventions v1.41.0 record it with content capture on: an `invoke_agent bench-agent` span
(`gen_ai.agent.version` = i % 3), then per round a `chat` span (the whole history as
`gen_ai.input.messages`, a thought and a `search` call as `gen_ai.output.messages`) and an
`execute_tool search` span (arguments and result), then a last `chat` span with the answer.
Its import is the 10 steps of `make_line` in benchmarks/import_trajectories.py. The tool calls
carry ids, so the imported steps also have `call_id`s; `make_line`'s `quotes` have no
counterpart in a trace.
"""

from __future__ import annotations

import json

BASE_NS = 1_714_521_600_000_000_000  # 2024-05-01T00:00:00Z
SEARCH = [
    {
        "type": "function",
        "name": "search",
        "description": "Search the encyclopedia.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


def _value(value) -> dict:
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def _span(i: int, k: int, parent: str | None, name: str, attributes: dict) -> dict:
    """Span k of trace i, started k seconds into the trace."""
    start = BASE_NS + i * 60_000_000_000 + k * 1_000_000_000
    return {
        "traceId": f"{i + 1:032x}",
        "spanId": f"{i + 1:012x}{k:04x}",
        "parentSpanId": parent or "",
        "name": name,
        "kind": 1 if parent is None or name.startswith("execute_tool") else 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 900_000_000),
        "attributes": [{"key": key, "value": _value(value)} for key, value in attributes.items()],
        "status": {},
    }


def _chat(i: int, k: int, parent: str, history: list, output: dict) -> dict:
    return _span(
        i,
        k,
        parent,
        "chat gpt-4o-mini",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.tool.definitions": json.dumps(SEARCH),
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps([output]),
        },
    )


def trace_lines(i: int, n_tasks: int) -> list[str]:
    entity = i % n_tasks
    prompt = f"Who founded entity {entity}?"
    answer = f"Person {i}"
    user = {"role": "user", "parts": [{"type": "text", "content": prompt}]}
    agent = _span(
        i,
        0,
        None,
        "invoke_agent bench-agent",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "openai",
            "gen_ai.agent.name": "bench-agent",
            "gen_ai.agent.version": str(i % 3),
            "gen_ai.input.messages": json.dumps([user]),
        },
    )
    parent = agent["spanId"]
    spans = [agent]
    history = [user]
    for s in range(3):
        call_id = f"call_{i}_{s}"
        arguments = {"query": f"entity {entity} founder {s}"}
        result = " ".join(
            f"[{k}] Result {k} for run {i}: a fictional article about place {k * 7 + s}." for k in range(8)
        )
        reply = {
            "role": "assistant",
            "finish_reason": "tool_call",
            "parts": [
                {"type": "text", "content": f"Step {s}: I should look up entity {entity} and check the dates."},
                {"type": "tool_call", "id": call_id, "name": "search", "arguments": arguments},
            ],
        }
        spans.append(_chat(i, 1 + 2 * s, parent, history, reply))
        spans.append(
            _span(
                i,
                2 + 2 * s,
                parent,
                "execute_tool search",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                    "gen_ai.tool.call.result": result,
                },
            )
        )
        history = history + [
            reply,
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": result}]},
        ]
    final = {"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": answer}]}
    spans.append(_chat(i, 7, parent, history, final))
    return [
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bench-agent"}}]},
                        "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": spans}],
                    }
                ]
            }
        )
    ]
