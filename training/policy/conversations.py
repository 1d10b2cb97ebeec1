"""Conversations as a policy writes them (plain Python, no Django).

OpenAI-form chat messages, from a client's request (serving.py) or a dataset row (the `sft`
and `dpo` exports a fine-tuning run trains on), become the messages the policy's chat
template saw in training: an assistant turn with `tool_calls` is written in the policy's own
call syntax by its tool parser, a tool result keeps its call's id and name. One function
does it for both, so a policy is served and fine-tuned on the same rendering.

For training, `conversation_tokens` gives the tokens of such a conversation and the mask of
what the policy wrote, built exactly as a rollout builds an episode (chat.py): each
assistant turn is its text and the end-of-turn token (mask 1), the rest is context (mask 0),
so supervised fine-tuning and DPO learn the policy's own actions and never the tool results.
"""

from __future__ import annotations

import json
from typing import Any

from annotate.trajectory_formats import TrajectoryFormatError, message_text
from core import json_input
from training.envs.base import INVALID_TOOL, Tool
from training.policy.chat import ChatFormat
from training.policy.parsers import ToolCall

ROLES = ("system", "developer", "user", "assistant", "tool")
QUOTES_HEADING = "\n\nQuotes:\n"  # annotate/chat_messages.py writes an answer's quotes after it so


class ConversationError(ValueError):
    """Messages or tools that cannot be rendered for the policy: the message names the field."""

    def __init__(self, message: str, param: str = "messages"):
        super().__init__(message)
        self.param = param


def text_of(content: Any, where: str) -> str:
    """A message's content: a string, null, or text parts (the importer's rule: anything else is
    refused, never dropped)."""
    try:
        return message_text(content, where)
    except TrajectoryFormatError as exc:
        raise ConversationError(str(exc)) from None


def tools_of(raw: Any) -> list[Tool]:
    """OpenAI function tools (`[{type: function, function: {name, description, parameters}}]`, or null)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConversationError("tools: a list of {type: function, function: {name, description, parameters}}", "tools")
    tools, names = [], set()
    for i, item in enumerate(raw):
        where = f"tools[{i}]"
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(item, dict) or item.get("type") != "function" or not isinstance(function, dict):
            raise ConversationError(f"{where}: {{type: function, function: {{name, parameters}}}}", "tools")
        name, parameters = function.get("name"), function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(name, str) or not name or name in names:
            raise ConversationError(f"{where}.function.name: a name of its own", "tools")
        if not isinstance(parameters, dict):
            raise ConversationError(f"{where}.function.parameters: a JSON schema object", "tools")
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise ConversationError(f"{where}.function.description: a string", "tools")
        names.add(name)
        tools.append(Tool(name=name, description=description, parameters=parameters))
    return tools


def _calls(raw: Any, where: str, called: dict[str, str]) -> list[ToolCall]:
    if not isinstance(raw, list):
        raise ConversationError(f"{where}.tool_calls: a list")
    calls = []
    for k, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ConversationError(f"{where}.tool_calls[{k}]: {{id, type: function, function: {{name, arguments}}}}")
        arguments = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            try:
                arguments = json_input.loads(arguments)
            except json_input.JsonInputError as exc:
                raise ConversationError(f"{where}.tool_calls[{k}].function.arguments: {exc}") from None
        if isinstance(call.get("id"), str):
            called[call["id"]] = function["name"]
        calls.append(ToolCall(function["name"], arguments))
    return calls


def _answer_call(text: str, answer_tool: Tool) -> ToolCall:
    """A final answer given as text, as the call of the environment's answer tool the policy makes
    (its quotes are in the conversation already, as the quote calls that kept them)."""
    text = text.split(QUOTES_HEADING, 1)[0].strip()
    key = next(iter(answer_tool.parameters.get("properties", {})), "text")
    return ToolCall(answer_tool.name, {key: text})


def template_messages(messages: Any, tools: list[Tool], parser, *, answer_tool: str | None = None) -> list[dict]:
    """OpenAI messages as the policy's template saw them in training. With `answer_tool` (the
    name of a tool that ends the episode), a last assistant message of plain text is written as
    that tool's call, the way the policy gives its answer."""
    if not isinstance(messages, list):
        raise ConversationError("messages: a list of {role, content}")
    called: dict[str, str] = {}  # tool call id -> tool name
    answering = next((t for t in tools if t.name == answer_tool), None) if answer_tool else None
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ConversationError(f"{where}: {{role, content}} with role one of {', '.join(ROLES)}")
        role = "system" if message["role"] == "developer" else message["role"]
        text = text_of(message.get("content"), where)
        if role == "assistant" and message.get("tool_calls"):
            calls = _calls(message["tool_calls"], where, called)
            out.append({"role": "assistant", "content": _format(parser, calls, text, where)})
        elif role == "assistant" and answering is not None and i == len(messages) - 1:
            out.append({"role": "assistant", "content": _format(parser, [_answer_call(text, answering)], "", where)})
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in called:
                raise ConversationError(f"{where}.tool_call_id: the id of an earlier assistant tool call")
            out.append({"role": "tool", "tool_call_id": call_id, "name": called[call_id], "content": text})
        else:
            out.append({"role": role, "content": text})
    return out


def _format(parser, calls: list[ToolCall], text: str, where: str) -> str:
    try:
        return parser.format(calls, text)
    except (ValueError, TypeError, AttributeError) as exc:  # e.g. a format with one call per turn given two
        raise ConversationError(
            f"{where}: the policy's tool-call format ({parser.name}) cannot write these {len(calls)} call(s): {exc}"
        ) from None


def conversation_tokens(chat: ChatFormat, messages: list[dict], opening: int, tools: list[dict] | None):
    """(ids, mask) of template messages whose first `opening` are the prompt (system, user):
    each assistant turn is the policy's (mask 1: its text and the end-of-turn token), the rest
    context (0), as a rollout builds an episode's tokens."""
    ids = chat.opening(messages[:opening], tools)
    mask = [0] * len(ids)
    i = opening
    while i < len(messages):
        if messages[i]["role"] != "assistant":
            raise ConversationError(
                f"messages[{i}]: a {messages[i]['role']} message where the policy's turn was expected "
                "(after the prompt, assistant turns alternate with their tool results)"
            )
        action = chat.encode(messages[i]["content"]) + chat.turn_end
        ids += action
        mask += [1] * len(action)
        j = i + 1
        while j < len(messages) and messages[j]["role"] == "tool":
            j += 1
        if j < len(messages):  # the conversation goes on: the results and the next generation prompt
            context = chat.continuation(messages[:j], tools, j - i - 1)
            ids += context
            mask += [0] * len(context)
        i = j
    return ids, mask


def prompt_length(messages: list[dict]) -> int:
    """How many leading messages are the prompt: everything before the first assistant turn."""
    return next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))


class PolicyConversations:
    """Dataset rows (OpenAI messages and their tools as JSON text) as one policy's training examples."""

    def __init__(self, chat: ChatFormat):
        self.chat = chat

    def _prepare(self, messages: Any, tools_json: Any) -> tuple[list[dict], list[dict] | None]:
        raw = json.loads(tools_json) if isinstance(tools_json, str) else tools_json
        tools = tools_of(raw)
        answer_tool = "answer" if any(t.name == "answer" for t in tools) else None
        rendered = template_messages(messages, tools, self.chat.parser(tools), answer_tool=answer_tool)
        return rendered, [t.as_openai() for t in tools] or None

    def sft(self, messages: Any, tools_json: Any) -> dict:
        """{input_ids, assistant_masks}: SFTTrainer builds its labels from the mask."""
        rendered, tools = self._prepare(messages, tools_json)
        ids, mask = conversation_tokens(self.chat, rendered, prompt_length(rendered), tools)
        if not any(mask):
            raise ConversationError("messages: no assistant turn to learn from")
        return {"input_ids": ids, "assistant_masks": mask}

    def preference(self, prompt: Any, chosen: Any, rejected: Any, tools_json: Any) -> dict:
        """{prompt_ids, chosen_ids, rejected_ids, chosen_mask, rejected_mask}: the shared prompt
        (with any steps both took), then each side's own turns, its tool results masked out."""
        if not all(isinstance(part, list) for part in (prompt, chosen, rejected)):
            raise ConversationError("prompt, chosen and rejected: lists of messages")
        first, tools = self._prepare(prompt + chosen, tools_json)
        second, _ = self._prepare(prompt + rejected, tools_json)
        opening = prompt_length(prompt + chosen)
        if opening != prompt_length(prompt + rejected):
            raise ConversationError("prompt: the same task must open both sides")
        a_ids, a_mask = conversation_tokens(self.chat, first, opening, tools)
        b_ids, b_mask = conversation_tokens(self.chat, second, opening, tools)
        n = 0
        while n < min(len(a_ids), len(b_ids)) and a_ids[n] == b_ids[n]:
            n += 1
        while n > 0 and (a_mask[n - 1] or b_mask[n - 1]):  # a turn that differs is the completion's, whole
            n -= 1
        if not any(a_mask[n:]) or not any(b_mask[n:]):
            raise ConversationError("chosen and rejected: each needs a turn of its own after the shared prompt")
        if a_ids[n:] == b_ids[n:]:
            raise ConversationError("chosen and rejected: the policy would write both the same way")
        return {
            "prompt_ids": a_ids[:n],
            "chosen_ids": a_ids[n:],
            "rejected_ids": b_ids[n:],
            "chosen_mask": a_mask[n:],
            "rejected_mask": b_mask[n:],
        }


def conversation_steps(
    messages: list[dict], tools: list[Tool], *, answer_tool: str = "answer"
) -> tuple[str, list[dict]]:
    """(the question, canonical steps) of a checked OpenAI conversation, recorded as the episode
    runner records an episode (training/envs/base.py), so a reward model scores a served
    conversation in the form it was trained on: the first user message is the question; a call
    of `answer_tool` (where the tools have it) is the answer; another call is an action and its
    tool message the observation (an error where it starts "Error:", as the runner writes
    them); plain assistant text is the answer without tools, and with tools a turn of no tool
    call where the tools have no answer tool (recorded as a call of "invalid", as the runner
    refuses it) and the answer otherwise, as the runner reads it."""
    names = {t.name for t in tools}
    question, steps = "", []
    called: dict[str, str] = {}
    for message in messages:
        role, text = message.get("role"), text_of(message.get("content"), "messages")
        if role == "user" and not question:
            question = text
        elif role == "user":
            steps.append({"kind": "observation", "tool": "user", "content": text})
        elif role == "assistant" and message.get("tool_calls"):
            if text.strip():
                steps.append({"kind": "thought", "text": text})
            for call in _calls(message["tool_calls"], "messages", called):
                if call.name == answer_tool and answer_tool in names:
                    value = call.arguments.get("text") if isinstance(call.arguments, dict) else None
                    steps.append(
                        {"kind": "answer", "text": value if isinstance(value, str) else json.dumps(call.arguments)}
                    )
                else:
                    steps.append({"kind": "action", "tool": call.name, "arguments": call.arguments})
        elif role == "assistant" and tools and answer_tool not in names:
            steps.append({"kind": "action", "tool": INVALID_TOOL, "arguments": {"text": text}})
            steps.append(
                {"kind": "observation", "tool": INVALID_TOOL, "content": "Error: no tool call", "is_error": True}
            )
        elif role == "assistant":  # plain text answers, as the runner reads it (episodes.act)
            steps.append({"kind": "answer", "text": text.split(QUOTES_HEADING, 1)[0].strip()})
        elif role == "tool":
            step = {"kind": "observation", "tool": called.get(message.get("tool_call_id"), "tool"), "content": text}
            if text.startswith("Error:"):
                step["is_error"] = True
            steps.append(step)
    return question, steps
