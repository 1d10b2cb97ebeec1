"""The environment interface: what an agent's world must provide, in plain Python (no Django).

An environment gives tasks (by split), the tools an agent may call (each a name, a
description and a JSON Schema of its arguments, declared as OpenAI function tools are),
carries out one tool call at a time, and scores a finished episode with a rubric:

    class MyEnv(Environment):
        name = "my-env"
        def tasks(self, split): ...                     # [EnvTask]
        def tools(self): ...                            # [Tool]
        def start(self, task): ...                      # per-episode state (anything)
        def call(self, state, tool, arguments): ...     # ToolResult
        def outcome(self, state, episode): ...          # Rubric

Episode limits (steps, loops), argument checking against the schemas and the record of
the episode in Arbiter's canonical trajectory form belong to `EpisodeRunner`, not to each
environment: a malformed call (an unknown tool, arguments that fail the schema) is an
error observation that uses a step, whatever the environment.

How to write one, register it and point Arbiter at it: docs/environments.md.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

# Seeded environments: training (behaviour cloning's worlds, rollouts, PPO) uses seeds in this
# range only, so a world of a seed above it is one no training step saw.
TRAINING_SEEDS = range(64)
# The last training seed's world is one behaviour cloning never imitates (`extra_worlds` stops
# before it): RL judges its checkpoints there, on names the policy has to read, not recall.
FRESH_WORLD_SEED = TRAINING_SEEDS.stop - 1
INVALID_TOOL = "invalid"  # the tool name a turn that is no tool call is recorded under
SYSTEM_PROMPT = (
    "You are an agent. Use the tools to find what the task asks, then give your final answer with the answer tool."
)


def rl_world_seeds(count: int) -> range:
    """The seeds of the extra worlds RL may practise on: the ones just below the fresh world
    (62, 61, ...), which behaviour cloning's default `extra_worlds` (seeds 1-20) leaves alone."""
    return range(FRESH_WORLD_SEED - count, FRESH_WORLD_SEED)


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call: OpenAI's function-tool declaration."""

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})

    def as_openai(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


# The final-answer tool as the built-in environments declare it: a call ends the episode.
ANSWER_TOOL = Tool(
    "answer",
    "Give the final answer and end the episode.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
)


@dataclass(frozen=True)
class EnvTask:
    """One task of an environment. `reference` is the known answer (never shown to annotators)."""

    external_id: str
    prompt: str
    reference: str = ""
    split: str = "train"
    metadata: dict = field(default_factory=dict)


class ToolServerLost(RuntimeError):
    """An environment's tool server is gone and could not be brought back: an infrastructure
    failure, never the agent's error. It ends the run, with this reason."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gives back. `done` ends the episode (the answer tool); `error` uses a step as any call."""

    content: str
    error: bool = False
    done: bool = False
    answer: str | None = None  # the final answer, when the call gave one


@dataclass(frozen=True, init=False)
class Rubric:
    """The outcome of a finished episode: correct or not, its utility (one number, higher is
    better: what a simulated annotator prefers, and RL's `utility` reward), and the
    named parts behind them. Stored with a trajectory as its `outcome` (`as_dict`)."""

    correct: bool
    utility: float
    parts: dict[str, Any] = field(default_factory=dict)

    def __init__(self, correct: bool, utility: float | None = None, parts: dict | None = None, *, score=None):
        if score is not None:  # the name before utility (until 2026-11); one number, one name since
            warnings.warn("Rubric(score=...) is now Rubric(utility=...)", DeprecationWarning, stacklevel=2)
            utility = score if utility is None else utility
        if utility is None:
            raise TypeError("Rubric needs utility= (a number: higher is better)")
        object.__setattr__(self, "correct", correct)
        object.__setattr__(self, "utility", utility)
        object.__setattr__(self, "parts", {} if parts is None else parts)

    def as_dict(self) -> dict:
        return {"correct": self.correct, "utility": self.utility, **self.parts}


@dataclass
class EpisodeRecord:
    """What the runner saw of an episode; given to `Environment.outcome`."""

    task: EnvTask
    steps: list[dict] = field(default_factory=list)  # canonical v1 steps
    calls: int = 0
    tool_errors: int = 0
    answer: str | None = None
    loop: bool = False
    truncated: bool = False

    @property
    def done(self) -> bool:
        return self.answer is not None or self.loop or self.truncated


class Environment(ABC):
    """Subclass and fill in the abstract methods; see the module docstring."""

    name: str = ""
    description: str = ""
    system_prompt: str = SYSTEM_PROMPT

    @abstractmethod
    def tasks(self, split: str) -> list[EnvTask]:
        """The tasks of a split (train, dev or eval), in a fixed order."""

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The tools an agent may call, with the JSON Schemas of their arguments."""

    def start(self, task: EnvTask) -> Any:
        """Per-episode state, handed back to `call` and `outcome` (None when there is none)."""
        return None

    @abstractmethod
    def call(self, state: Any, tool: str, arguments: dict) -> ToolResult:
        """Carry out one call; the runner has checked the tool exists and the arguments fit its schema."""

    @abstractmethod
    def outcome(self, state: Any, episode: EpisodeRecord) -> Rubric:
        """Score a finished episode."""

    def demonstrator(self, *, seed: int = 0, **options):
        """Optional, for behaviour cloning: a scripted agent, as a function (task, state) giving
        its turns one at a time, each a (tool, arguments) pair, or a str written as it is (a
        deliberate malformed turn). None when the environment has none. It must take `seed`
        (each demonstrated world passes its own) and accept other options (`mistakes`, the
        demonstrator's error rates, which it may ignore): `def demonstrator(self, *, seed=0, **options)`."""
        return None

    def alive(self) -> bool:
        """Whether the environment can still serve calls (an MCP server that died cannot); a
        process that caches environments builds a new one when this says no."""
        return True

    def close(self) -> None:
        """Release what the environment holds (a server process, a connection)."""

    def vocabulary_texts(self) -> list[str]:
        """Optional: texts of the world (documents, pages) a tokenizer trained for it should read."""
        return []

    def opening_messages(self, task: EnvTask) -> list[dict]:
        """The chat an episode starts from (the tools go beside it, as `tools`)."""
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task.prompt}]


def demonstrator_problem(env: Environment) -> str | None:
    """Why behaviour cloning cannot use this environment's demonstrator (it has none, or its
    `demonstrator` does not take the options Arbiter passes), or None."""
    try:
        turns = env.demonstrator(seed=0, mistakes=None)
    except TypeError as exc:
        return (
            f"{env.name or type(env).__name__}.demonstrator cannot be called with seed= and mistakes= ({exc}); "
            "write it as `def demonstrator(self, *, seed=0, **options)` (docs/environments.md)."
        )
    except Exception as exc:  # noqa: BLE001 - a user's demonstrator may fail in any way; say how
        return f"{env.name or type(env).__name__}.demonstrator failed: {type(exc).__name__}: {exc}"
    if turns is None:
        return (
            f"{env.name or type(env).__name__} has no scripted demonstrator, so behaviour cloning has nothing "
            "to imitate; start from a policy of your own instead (--policy-id; docs/policies.md)."
        )
    return None


@dataclass(frozen=True)
class Limits:
    max_steps: int = 8
    loop_repeats: int = 3  # the same call this many times in a row ends the episode as a loop


class EpisodeRunner:
    """Plays episodes of one environment under the runner's limits, one tool call at a time."""

    def __init__(self, env: Environment, limits: Limits = Limits()):
        self.env, self.limits = env, limits

    @cached_property
    def tools(self) -> dict[str, Tool]:
        tools = {t.name: t for t in self.env.tools()}
        for tool in tools.values():
            jsonschema.Draft202012Validator.check_schema(tool.parameters)
        return tools

    @cached_property
    def _validators(self) -> dict[str, jsonschema.Draft202012Validator]:
        return {name: jsonschema.Draft202012Validator(t.parameters) for name, t in self.tools.items()}

    def start(self, task: EnvTask) -> Episode:
        return Episode(self, task, self.env.start(task))


class Episode:
    """One episode in progress: `call` until `done`, then `outcome()`."""

    def __init__(self, runner: EpisodeRunner, task: EnvTask, state: Any):
        self.runner, self.state = runner, state
        self.record = EpisodeRecord(task=task)
        self._recent: list[str] = []

    @property
    def done(self) -> bool:
        return self.record.done

    def call(self, tool: str, arguments: Any, *, call_id: str | None = None) -> ToolResult:
        """Carry out one tool call (or refuse it as an error result); every call uses a step."""
        problem = self._problem(tool, arguments)
        return self._step(tool, arguments, call_id, problem)

    def think(self, text: str) -> None:
        """Text the policy wrote beside its tool calls: a thought step (it uses no step of the limit)."""
        if text.strip():
            self.record.steps.append({"kind": "thought", "text": text})

    def refuse(self, text: str, problem: str, *, call_id: str | None = None) -> ToolResult:
        """A turn the policy wrote that is no tool call at all (unparseable): an error result
        that uses a step, recorded as a call of the tool "invalid" with the text it wrote."""
        return self._step(INVALID_TOOL, {"text": text}, call_id, problem)

    def _step(self, tool: str, arguments: Any, call_id: str | None, problem: str) -> ToolResult:
        if self.done:
            raise RuntimeError("the episode has ended")
        record = self.record
        record.calls += 1
        if problem:
            result = ToolResult(f"Error: {problem}", error=True)
        else:
            result = self.runner.env.call(self.state, tool, arguments)
        self._record(tool, arguments, result, call_id)
        signature = f"{tool}:{sorted(arguments.items()) if isinstance(arguments, dict) else arguments!r}"
        self._recent = (self._recent + [signature])[-self.runner.limits.loop_repeats :]
        if not self.done:
            repeats = self.runner.limits.loop_repeats
            if len(self._recent) == repeats and len(set(self._recent)) == 1:
                record.loop = True
            elif record.calls >= self.runner.limits.max_steps:
                record.truncated = True
        return result

    def _problem(self, tool: str, arguments: Any) -> str:
        tools = self.runner.tools
        if tool not in tools:
            return f"unknown tool {tool!r}; the tools are {', '.join(sorted(tools))}."
        if not isinstance(arguments, dict):
            return f"the arguments of {tool} must be a JSON object."
        errors = sorted(self.runner._validators[tool].iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            where = ".".join(map(str, errors[0].absolute_path))
            return f"bad arguments for {tool}: {(where + ': ') if where else ''}{errors[0].message}."
        return ""

    def _record(self, tool: str, arguments: Any, result: ToolResult, call_id: str | None) -> None:
        record = self.record
        if result.done:  # the answer is a step of its own in the canonical form, as in imported transcripts
            record.answer = result.answer if result.answer is not None else result.content
            record.steps.append({"kind": "answer", "text": record.answer})
            return
        action = {
            "kind": "action",
            "tool": tool,
            "arguments": arguments if isinstance(arguments, dict) else str(arguments),
        }
        if call_id:
            action["call_id"] = call_id
        record.steps.append(action)
        observation = {"kind": "observation", "tool": tool, "content": result.content}
        if call_id:
            observation["call_id"] = call_id
        if result.error:
            observation["is_error"] = True
            record.tool_errors += 1
        record.steps.append(observation)

    def outcome(self) -> Rubric:
        """The environment's rubric, with the runner's own figures (steps, tool errors, loop,
        truncated, answered) among its parts unless the environment gave them."""
        rubric = self.runner.env.outcome(self.state, self.record)
        record = self.record
        standard = {
            "steps": record.calls,
            "tool_errors": record.tool_errors,
            "loop": record.loop,
            "truncated": record.truncated,
            "answered": record.answer is not None,
        }
        return Rubric(correct=rubric.correct, utility=rubric.utility, parts={**standard, **rubric.parts})

    def trajectory(self, *, agent: str, version: str = "") -> dict:
        """The finished episode as a canonical v1 trajectory (annotate/schemas/trajectory.v1.schema.json)."""
        task = self.record.task
        system = [m["content"] for m in self.runner.env.opening_messages(task) if m.get("role") == "system"]
        return {
            "schema": "arbiter.trajectory/v1",
            "task": {
                "external_id": task.external_id,
                "prompt": task.prompt,
                "reference_answer": task.reference,
                "environment": self.runner.env.name,
                "split": task.split,
                "metadata": dict(task.metadata),
            },
            "agent": {"name": agent, "version": version},
            "steps": list(self.record.steps) or [{"kind": "thought", "text": "(no action)"}],
            "answer": self.record.answer or "",
            "outcome": self.outcome().as_dict(),
            "metadata": {
                "environment": self.runner.env.name,
                "loop": self.record.loop,
                **({"system_prompt": "\n\n".join(system)} if system else {}),
                "truncated": self.record.truncated,
                "tools": [t.as_openai() for t in self.runner.tools.values()],
            },
        }
