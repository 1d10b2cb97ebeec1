"""Langfuse trace lines for the import benchmark (`benchmarks/import_trajectories.py`).

`trace_lines(i, n_tasks)` gives one trace as `GET /api/public/traces/{id}` returns it (a
trace with its observations embedded, one JSON line): an AGENT observation, per round a
GENERATION given the growing message history (its output the thought and a `search` call)
and a TOOL observation running that search, then a last GENERATION whose output is the
answer. Imported with `--format langfuse`, it is the 10 steps of `make_line(i, n_tasks)`
(the answer's `quotes` aside: no trace format carries them). The tool calls carry no id,
as some SDK integrations log them, so the steps have no `call_id`, like make_line's.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _time(i: int, ms: int) -> str:
    return (START + timedelta(seconds=i, milliseconds=ms)).isoformat().replace("+00:00", "Z")


def _observation(i: int, n: int, kind: str, name: str, parent: str | None, **fields) -> dict:
    return {
        "id": f"obs-{i}-{n}",
        "traceId": f"trace-{i}",
        "type": kind,
        "name": name,
        "startTime": _time(i, 10 * n),
        "endTime": _time(i, 10 * n + 9),
        "parentObservationId": parent,
        "level": "DEFAULT",
        "statusMessage": None,
        "metadata": {},
        "version": None,
        **fields,
    }


def trace_lines(i: int, n_tasks: int) -> list[str]:
    entity = i % n_tasks
    prompt = f"Who founded entity {entity}?"
    answer = f"Person {i}"
    agent_id = f"obs-{i}-0"
    history: list[dict] = [{"role": "user", "content": prompt}]
    observations = [_observation(i, 0, "AGENT", "bench-agent", None, input=prompt, output=answer)]
    for s in range(3):
        query = {"query": f"entity {entity} founder {s}"}
        said = {
            "role": "assistant",
            "content": f"Step {s}: I should look up entity {entity} and check the dates.",
            "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": json.dumps(query)}}],
        }
        result = " ".join(
            f"[{k}] Result {k} for run {i}: a fictional article about place {k * 7 + s}." for k in range(8)
        )
        observations.append(
            _observation(
                i, 2 * s + 1, "GENERATION", "chat", agent_id, model="bench-model", input=list(history), output=said
            )
        )
        observations.append(_observation(i, 2 * s + 2, "TOOL", "search", agent_id, input=query, output=result))
        history += [said, {"role": "tool", "name": "search", "content": result}]
    observations.append(
        _observation(
            i,
            7,
            "GENERATION",
            "chat",
            agent_id,
            model="bench-model",
            input=history,
            output={"role": "assistant", "content": answer},
        )
    )
    trace = {
        "id": f"trace-{i}",
        "timestamp": _time(i, 0),
        "name": "bench-agent",
        "input": prompt,
        "output": answer,
        "sessionId": None,
        "userId": None,
        "metadata": {"external_id": f"bench-{entity}"},
        "tags": [],
        "release": None,
        "version": str(i % 3),
        "observations": observations,
        "scores": [],
    }
    return [json.dumps(trace)]
