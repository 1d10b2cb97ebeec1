"""One conversation rebuilt from a trace's model calls and tool executions, as canonical steps.

Plain Python, no Django. The trace converters (OpenTelemetry GenAI, OpenInference,
LangSmith, Langfuse) walk a trace in execution order and tell a `Transcript` what happened:

- `model_input(messages)`: the messages one model call was given. Every call repeats the
  conversation so far, so only what is new is taken, counted by role: the first user
  message is the task prompt, later user messages (past the number already seen) are
  observations with tool `user`; assistant messages past the number of outputs already
  seen are read as outputs (a trace whose model spans did not record their output still
  has it in the next call's input); system messages are the system prompt (each distinct
  text once); tool messages answer pending calls, by id, once. When the run's prompt was
  given first (`user`, a chat agent's later turn), the messages before it in the first
  model input are earlier turns: left out of every input, and counted.
- `model_output(messages)`: what the call produced: reasoning is a thought, text with tool
  calls is a thought, each call an action (parallel calls in order; a call id seen before is
  not added twice); text without calls is a candidate for the answer.
- `tool_execution(...)`: a tool span. When it answers a pending call (by call id, else the
  pending call of that tool's name with the same arguments, else the earliest of that name)
  it is that call's observation; otherwise a tool the code ran on its own (no model asked
  for it): an action and its observation.

`canonical(...)` then gives the canonical v1 object: the last assistant text without tool
calls is the answer; when no model output had one, the agent's own output (`final_output`)
is (and when both exist and differ, the agent's output is kept in metadata `agent_output`).
Anything a converter leaves out on purpose is counted with `drop` and reported by the
import. Call ids that are not strings are refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from annotate.trajectory_formats import SCHEMA_V1, NotJson, TrajectoryFormatError, nested_json


@dataclass
class ToolCall:
    name: str
    arguments: dict | str
    id: str | None = None


@dataclass
class Message:
    """One chat message, whatever the trace format wrote it as."""

    role: str  # system | user | assistant | tool
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None  # a tool message: the call it answers
    name: str | None = None  # a tool message: the tool's name, where known
    is_error: bool = False


def _check_id(call_id: Any) -> None:
    if call_id is not None and not isinstance(call_id, str):
        raise TrajectoryFormatError(f"a tool call id must be a string, not {type(call_id).__name__}")


def arguments_of(raw: Any) -> dict | str:
    """Tool arguments as the canonical schema keeps them: an object, else the raw text."""
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = nested_json(raw, "tool call arguments")
        except NotJson:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return json.dumps(raw, ensure_ascii=False, sort_keys=True)


def text_of(value: Any) -> str:
    """A tool result or an output as text: strings as they are, anything else as JSON (keys in
    the order the tool wrote them)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class Transcript:
    def __init__(self) -> None:
        self.prompt: str | None = None
        self.steps: list[dict] = []
        self.system_parts: list[str] = []
        self.tools: list | None = None
        self.dropped: dict[str, int] = {}
        self._users_seen = 0
        self._names: dict[str, str] = {}  # call id -> tool name
        self._pending: list[dict] = []  # action steps without an observation yet, in order
        self._answered: set[str] = set()
        self._outputs_seen = 0
        self._earlier: int | None = None  # earlier turns' messages at the start of every model input
        self._plain: int | None = None  # index in steps of the last assistant text without calls

    # What a converter reports ---------------------------------------------------------

    def system(self, text: str) -> None:
        if text and text.strip() and text not in self.system_parts:
            self.system_parts.append(text)

    def declare_tools(self, tools: list) -> None:
        """The tools the agent was given (JSON schemas); the first non-empty list is kept."""
        if tools and self.tools is None:
            self.tools = tools

    def drop(self, kind: str, n: int = 1) -> None:
        self.dropped[kind] = self.dropped.get(kind, 0) + n

    def user(self, text: str) -> None:
        """A user message that is certainly new (an agent's input, a user turn)."""
        self._users_seen += 1
        if self.prompt is None:
            self.prompt = text
        else:
            self.steps.append({"kind": "observation", "tool": "user", "content": text})

    def model_input(self, messages: list[Message]) -> None:
        messages = self._from_prompt(messages)
        users = assistants = 0
        for message in messages:
            if message.role == "system":
                self.system(message.text)
            elif message.role == "user":
                users += 1
                if users > self._users_seen:
                    self.user(message.text)
            elif message.role == "assistant":
                assistants += 1
                if assistants > self._outputs_seen:
                    self.model_output([message])
            elif message.role == "tool":
                self._observe(message.call_id, message.name, message.text, message.is_error)
            else:
                raise TrajectoryFormatError(
                    f"message role {message.role[:40]!r} cannot be imported (expected system, user, assistant or tool)"
                )

    def model_output(self, messages: list[Message]) -> None:
        for message in messages:
            if message.role != "assistant":
                raise TrajectoryFormatError(f"a model output with role {message.role[:40]!r} (expected assistant)")
            self._outputs_seen += 1
            if message.reasoning.strip():
                self.steps.append({"kind": "thought", "text": message.reasoning})
            if message.calls:
                if message.text.strip():
                    self.steps.append({"kind": "thought", "text": message.text})
                for call in message.calls:
                    self._act(call)
            elif message.text.strip():
                self.steps.append({"kind": "thought", "text": message.text})
                self._plain = len(self.steps) - 1

    def tool_execution(
        self, *, name: str, arguments: Any, result: str, call_id: str | None = None, is_error: bool = False
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TrajectoryFormatError("a tool execution without the tool's name")
        _check_id(call_id)
        action = None if call_id in self._answered else self._match(call_id, name, arguments_of(arguments))
        if action is None:  # run by the code, not asked for by a model (or a second run of a call)
            known = call_id is not None and call_id in self._names
            action = self._act(ToolCall(name=name, arguments=arguments, id=None if known else call_id))
        self._answer(action, result, is_error)

    # Building -----------------------------------------------------------------------

    def canonical(
        self,
        *,
        agent: dict | None,
        final_output: str | None = None,
        task: dict | None = None,
        metadata: dict | None = None,
        outcome: dict | None = None,
    ) -> tuple[dict, dict[str, int]]:
        task = dict(task or {})
        if not task.get("prompt"):
            if not self.prompt:
                raise TrajectoryFormatError("no user input to take the task prompt from")
            task["prompt"] = self.prompt
        steps = list(self.steps)
        metadata = dict(metadata or {})
        if self._plain is not None:
            answer = steps[self._plain]["text"]
            steps[self._plain] = {"kind": "answer", "text": answer}
            if final_output and final_output.strip() != answer.strip():
                metadata["agent_output"] = final_output  # the agent returned something else: kept
        elif final_output:
            steps.append({"kind": "answer", "text": final_output})
        if not steps:
            raise TrajectoryFormatError("the trace holds no model output, tool call or answer to import")
        if self.system_parts:
            metadata["system_prompt"] = "\n\n".join(self.system_parts)
        if self.tools:
            metadata["tools"] = self.tools
        if self.dropped:
            metadata["dropped"] = dict(self.dropped)
        obj: dict[str, Any] = {"schema": SCHEMA_V1, "task": task, "steps": steps, "metadata": metadata}
        if agent:
            obj["agent"] = agent
        if outcome is not None:
            obj["outcome"] = outcome
        return obj, dict(self.dropped)

    # Internals ------------------------------------------------------------------------

    def _from_prompt(self, messages: list[Message]) -> list[Message]:
        """A model input from this run's prompt on. A chat agent's later turn is given the
        earlier turns too, which are context, not what this run did: in the first model call,
        the messages before the last user message equal to the prompt (system messages aside)
        are earlier turns; they are counted once as `earlier_turn_message`, and as many are
        left out of every later call's input."""
        if self._earlier is None:
            if self.prompt is None:
                return messages
            at = next(
                (
                    i
                    for i in range(len(messages) - 1, -1, -1)
                    if messages[i].role == "user" and messages[i].text == self.prompt
                ),
                None,
            )
            self._earlier = sum(m.role != "system" for m in messages[:at]) if at else 0
            if self._earlier:
                self.drop("earlier_turn_message", self._earlier)
        if not self._earlier:
            return messages
        kept, skipped = [], 0
        for message in messages:
            if message.role != "system" and skipped < self._earlier:
                skipped += 1
            else:
                kept.append(message)
        return kept

    def _act(self, call: ToolCall) -> dict | None:
        """Add an action; None when a call with this id is already there (an output repeated)."""
        if not isinstance(call.name, str) or not call.name:
            raise TrajectoryFormatError("a tool call without the tool's name")
        _check_id(call.id)
        step = {"kind": "action", "tool": call.name, "arguments": arguments_of(call.arguments)}
        if call.id is not None:
            if call.id in self._names:
                return None
            step["call_id"] = call.id
            self._names[call.id] = call.name
        self.steps.append(step)
        self._pending.append(step)
        return step

    def _match(self, call_id: str | None, name: str | None, arguments: Any = None) -> dict | None:
        """The pending action this result answers: by id, else the earliest of that name with
        the same arguments (parallel calls of one tool finish in any order), else the earliest
        of that name."""
        if call_id is not None:
            for step in self._pending:
                if step.get("call_id") == call_id:
                    return step
            if call_id in self._names:
                return None
        named = [step for step in self._pending if name is None or step["tool"] == name]
        if arguments is not None:
            for step in named:
                if step["arguments"] == arguments:
                    return step
        return named[0] if named else None

    def _observe(self, call_id: str | None, name: str | None, content: str, is_error: bool) -> None:
        """A tool result in a model's input: the observation of the pending call it answers.
        A result seen already (every later model call repeats it) or whose call this trace
        does not hold (history from before the trace) adds nothing."""
        _check_id(call_id)
        if call_id is not None and call_id in self._answered:
            return
        action = self._match(call_id, name)
        if action is not None and call_id is not None and action.get("call_id") not in (None, call_id):
            return  # an id this trace never called: not an answer to another call
        if action is not None:
            self._answer(action, content, is_error)

    def _answer(self, action: dict, content: str, is_error: bool) -> None:
        self._pending.remove(action)
        step = {"kind": "observation", "tool": action["tool"], "content": content}
        if action.get("call_id") is not None:
            step["call_id"] = action["call_id"]
            self._answered.add(action["call_id"])
        if is_error:
            step["is_error"] = True
        self.steps.append(step)
