"""LangSmith run exports for the import benchmark: one trace per `make_line(i, n_tasks)`.

`trace_lines(i, n_tasks)` gives the JSONL lines (`Client.list_runs()`, one run per line) of
one LangGraph-style agent run whose import is the 10 steps of `make_line` in
benchmarks/import_trajectories.py: a root chain run `bench-agent` (version in
`extra.metadata.revision_id`), then per round an `llm` run (LangChain serialized messages,
the whole history as input, a thought and a `search` call as output) and a `tool` run
`search`, then a last `llm` run with the answer. The tool calls carry ids, so the imported
steps also have `call_id`s; `make_line`'s `quotes` have no counterpart in a trace.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

BASE = datetime(2024, 5, 1, tzinfo=timezone.utc)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the encyclopedia.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]


def _message(cls: str, kind: str, **kwargs) -> dict:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", cls],
        "kwargs": {"type": kind, **kwargs},
    }


def _run(
    i: int,
    k: int,
    parent: dict | None,
    run_type: str,
    name: str,
    inputs: dict,
    outputs: dict,
    extra: dict | None = None,
) -> dict:
    """Run k of trace i, started k seconds into the trace."""
    run_id = f"00000000-0000-4000-8000-{i:08x}{k:04x}"
    start = BASE + timedelta(minutes=i, seconds=k)
    segment = start.strftime("%Y%m%dT%H%M%S%fZ") + run_id
    return {
        "id": run_id,
        "name": name,
        "run_type": run_type,
        "trace_id": parent["trace_id"] if parent else run_id,
        "parent_run_id": parent["id"] if parent else None,
        "dotted_order": f"{parent['dotted_order']}.{segment}" if parent else segment,
        "start_time": start.isoformat().replace("+00:00", ""),
        "end_time": (start + timedelta(milliseconds=900)).isoformat().replace("+00:00", ""),
        "inputs": inputs,
        "outputs": outputs,
        "error": None,
        "extra": extra or {"metadata": {}},
        "tags": [],
        "status": "success",
    }


def trace_lines(i: int, n_tasks: int) -> list[str]:
    entity = i % n_tasks
    prompt = f"Who founded entity {entity}?"
    answer = f"Person {i}"
    llm_extra = {
        "invocation_params": {"model": "gpt-4o-mini", "tools": TOOLS},
        "metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini"},
    }
    root = _run(
        i,
        0,
        None,
        "chain",
        "bench-agent",
        {"messages": [_message("HumanMessage", "human", content=prompt)]},
        {"output": answer},
        extra={"metadata": {"revision_id": str(i % 3)}},
    )
    runs = [root]
    history = [_message("HumanMessage", "human", content=prompt)]
    for s in range(3):
        call = {
            "name": "search",
            "args": {"query": f"entity {entity} founder {s}"},
            "id": f"call_{i}_{s}",
            "type": "tool_call",
        }
        thought = f"Step {s}: I should look up entity {entity} and check the dates."
        reply = _message("AIMessage", "ai", content=thought, tool_calls=[call])
        runs.append(
            _run(
                i,
                1 + 2 * s,
                root,
                "llm",
                "ChatOpenAI",
                {"messages": [list(history)]},
                {"generations": [[{"text": thought, "type": "ChatGeneration", "message": reply}]]},
                extra=llm_extra,
            )
        )
        result = " ".join(
            f"[{k}] Result {k} for run {i}: a fictional article about place {k * 7 + s}." for k in range(8)
        )
        tool_message = _message(
            "ToolMessage", "tool", content=result, tool_call_id=call["id"], name="search", status="success"
        )
        runs.append(_run(i, 2 + 2 * s, root, "tool", "search", call["args"], {"output": tool_message}))
        history += [reply, tool_message]
    final = _message("AIMessage", "ai", content=answer)
    runs.append(
        _run(
            i,
            7,
            root,
            "llm",
            "ChatOpenAI",
            {"messages": [history]},
            {"generations": [[{"text": answer, "type": "ChatGeneration", "message": final}]]},
            extra=llm_extra,
        )
    )
    return [json.dumps(run) for run in runs]
