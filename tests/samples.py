"""Hand-built trajectories in both import formats."""

import json


def canonical(task_id="t1", prompt="Who founded Veloran?", answer="Ilse Marrow", agent="agent", n=0, **extra):
    obj = {
        "schema": "arbiter.trajectory/v1",
        "task": {"external_id": task_id, "prompt": prompt},
        "agent": {"name": agent, "version": "1"},
        "steps": [
            {"kind": "thought", "text": f"search for it ({n})"},
            {"kind": "action", "tool": "search", "arguments": {"query": "Veloran"}},
            {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks"},
            {"kind": "answer", "text": answer, "quotes": ["founded by Ilse Marrow"]},
        ],
    }
    obj.update(extra)
    return obj


def chat_parallel(task_id="chat-1"):
    """An OpenAI transcript with two tool calls in one assistant turn."""
    return {
        "messages": [
            {"role": "system", "content": "You are a research agent."},
            {"role": "user", "content": "Where was Tamsin Quell born?"},
            {
                "role": "assistant",
                "content": "Two searches at once.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"query": "Tamsin Quell"})},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"query": "Quell birthplace"})},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_2", "content": "[0] Drevholm"},
            {"role": "tool", "tool_call_id": "call_1", "content": "[0] Tamsin Quell (composer)"},
            {"role": "assistant", "content": "Drevholm"},
        ],
        "task": {"external_id": task_id},
        "agent": {"name": "chat-agent", "version": "2"},
    }


def jsonl(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)
