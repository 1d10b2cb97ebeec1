"""Canonical steps as chat messages, the form TRL and chat templates read (plain Python).

Every message has the same keys, so JSONL and Parquet carry one schema:
`role`, `content`, `tool_calls` (list or null), `tool_call_id` (or null), `name` (or null),
`is_error` (true for a failed tool's result, else null).
A thought followed by tool calls becomes one assistant message with that text as content
and the calls as `tool_calls` (arguments as a JSON string, as the OpenAI format has
them); an action logged without a call id gets `arbiter-call-<step>` (`INVENTED_CALL_ID`),
which the OpenAI chat import reads back as no id; each observation is a `tool` message
answering its call; any other thought is an assistant message of its own; the answer is
the final assistant message, with its quotes listed after the text in a `Quotes:` block
(`QUOTES_HEADING`, one `> ` line each), which the OpenAI chat import reads back. So
importing `prompt` + `chosen` as an OpenAI transcript gives the same steps back
(tests/annotate/test_round_trip.py).
"""

from __future__ import annotations

import json

INVENTED_CALL_ID = "arbiter-call-"
QUOTES_HEADING = "\n\nQuotes:\n"


def _message(role: str, content: str = "", *, tool_calls=None, tool_call_id=None, name=None, is_error=None) -> dict:
    return {
        "role": role,
        "content": content,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "name": name,
        "is_error": is_error,
    }


def _arguments(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def steps_to_messages(steps: list[dict]) -> list[dict]:
    messages: list[dict] = []
    pending_thought: str | None = None
    open_calls: list[str] = []  # call ids waiting for their observation, in order
    for i, step in enumerate(steps):
        kind = step.get("kind")
        if kind == "thought":
            if pending_thought is not None:
                messages.append(_message("assistant", pending_thought))
            pending_thought = step.get("text", "")
        elif kind == "action":
            call_id = step.get("call_id") or f"{INVENTED_CALL_ID}{i}"
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": step.get("tool", ""), "arguments": _arguments(step.get("arguments", {}))},
            }
            last = messages[-1] if messages else None
            # Calls in a row (parallel calls) share one assistant message.
            if pending_thought is None and last and last["role"] == "assistant" and last["tool_calls"]:
                last["tool_calls"].append(call)
            else:
                messages.append(_message("assistant", pending_thought or "", tool_calls=[call]))
                pending_thought = None
            open_calls.append(call_id)
        elif kind == "observation":
            if pending_thought is not None:
                messages.append(_message("assistant", pending_thought))
                pending_thought = None
            call_id = step.get("call_id") or (open_calls[0] if open_calls else None)
            if call_id in open_calls:
                open_calls.remove(call_id)
            if call_id is None:  # an observation with no call before it (a user turn, say)
                messages.append(_message("user", step.get("content", "")))
            else:
                messages.append(
                    _message(
                        "tool",
                        step.get("content", ""),
                        tool_call_id=call_id,
                        name=step.get("tool") or None,
                        is_error=True if step.get("is_error") else None,
                    )
                )
        elif kind == "answer":
            text = step.get("text", "")
            quotes = step.get("quotes") or []
            if quotes:
                text += QUOTES_HEADING + "\n".join(f"> {q}" for q in quotes)
            if pending_thought is not None:
                messages.append(_message("assistant", pending_thought))
                pending_thought = None
            messages.append(_message("assistant", text))
    if pending_thought is not None:
        messages.append(_message("assistant", pending_thought))
    return messages


def prompt_messages(prompt: str, system_prompt: str | None = None) -> list[dict]:
    """The task as chat messages: a leading `system` message when the agent had one, then the user turn."""
    system = [_message("system", system_prompt)] if system_prompt else []
    return system + [_message("user", prompt)]


def messages_to_text(messages: list[dict]) -> str:
    """A plain-text transcript for models without a chat template."""
    lines = []
    for m in messages:
        if m["role"] == "system":
            lines.append(f"System: {m['content']}")
        elif m["role"] == "user":
            lines.append(f"User: {m['content']}")
        elif m["role"] == "tool":
            lines.append(f"Tool ({m['name'] or 'result'}): {m['content']}")
        else:
            if m["content"]:
                lines.append(f"Assistant: {m['content']}")
            for call in m["tool_calls"] or []:
                lines.append(f"Assistant calls {call['function']['name']}({call['function']['arguments']})")
    return "\n".join(lines)


def openai_tools(tools) -> list | None:
    """Declared tools in the OpenAI function form (`{"type": "function", "function": {"name",
    "description", "parameters"}}`), whichever form they were recorded in: already that form,
    Anthropic's (`name`, `description`, `input_schema`), MCP's (`inputSchema`) or the flat
    OpenTelemetry GenAI definition (`type`, `name`, `description`, `parameters`). An entry of no
    known form is kept as it is. None when there are none."""
    if not isinstance(tools, list) or not tools:
        return None
    out = []
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            out.append(tool)
        elif isinstance(tool, dict) and isinstance(tool.get("name"), str):
            function = {"name": tool["name"]}
            if tool.get("description") is not None:
                function["description"] = tool["description"]
            schema = next((tool[k] for k in ("parameters", "input_schema", "inputSchema") if k in tool), None)
            function["parameters"] = schema if schema is not None else {"type": "object", "properties": {}}
            out.append({"type": "function", "function": function})
        else:
            out.append(tool)
    return out
