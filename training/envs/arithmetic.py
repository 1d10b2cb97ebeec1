"""A second built-in environment, of another kind than the encyclopedia: word problems with a calculator.

Tasks are generated from a seed: a story with two or three quantities and a question
("A depot holds 48 crates of 17 jars; 95 jars break. How many jars are left?"). The
agent has a `calculate` tool (arithmetic on numbers: + - * / // % ** and parentheses,
evaluated safely over the expression's syntax tree, never `eval`) and an `answer` tool.
Splits are fixed by the task's number (train 70%, dev 10%, eval 20%); a world built from
another seed shares no task with this one. The rubric: correct when the answer holds the
right number; the same step, tool-error and loop weights as the encyclopedia.
"""

from __future__ import annotations

import ast
import math
import operator
import random
import re
from dataclasses import dataclass

from training.envs.base import ANSWER_TOOL, Environment, EnvTask, EpisodeRecord, Rubric, Tool, ToolResult
from training.envs.utility import episode_utility

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
MAX_MAGNITUDE = 10**12


class CalculatorError(ValueError):
    pass


def calculate(expression: str) -> float:
    """Evaluate arithmetic on numbers; anything else (names, calls, huge powers) is refused."""
    if len(expression) > 200:
        raise CalculatorError("the expression is longer than 200 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise CalculatorError(f"cannot read {expression!r} as arithmetic") from None

    def value(node) -> float:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 12 or abs(left) > 10**6):
                raise CalculatorError("that power is too large")
            try:
                result = _OPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalculatorError("division by zero") from None
            if isinstance(result, complex) or not math.isfinite(result) or abs(result) > MAX_MAGNITUDE:
                raise CalculatorError("the result is out of range")
            return result
        raise CalculatorError("only numbers, + - * / // % ** and parentheses are allowed")

    return value(tree)


def _format(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:.6g}"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

STORIES = [  # (the problem, the expression that solves it)
    ("A depot holds {a} crates of {b} jars; {c} jars break. How many jars are left?", "{a} * {b} - {c}"),
    (
        "A train has {a} carriages with {b} seats each, and {c} seats are taken. How many seats are free?",
        "{a} * {b} - {c}",
    ),
    ("{a} workers each pack {b} boxes a day for {c} days. How many boxes do they pack?", "{a} * {b} * {c}"),
    ("A library had {a} books, bought {b} more and gave away {c}. How many books does it have now?", "{a} + {b} - {c}"),
    ("A baker makes {a} trays of {b} rolls and sells all but {c}. How many rolls are sold?", "{a} * {b} - {c}"),
]
SPLIT_OF = ["train"] * 7 + ["dev"] + ["eval"] * 2


@dataclass
class _State:
    task: EnvTask
    results: list[str]


class ArithmeticEnvironment(Environment):
    name = "arithmetic"
    description = "Word problems with a calculator tool (generated per seed)."
    system_prompt = (
        "Solve the problem. Use the calculate tool for arithmetic, then give the number with the answer tool."
    )

    def __init__(self, *, seed: int = 0, n_tasks: int = 400):
        self.seed, self.n_tasks = seed, n_tasks
        rng = random.Random(f"arithmetic:{seed}")
        self._tasks = []
        for i in range(n_tasks):
            template, solution = STORIES[rng.randrange(len(STORIES))]
            a, b = rng.randint(2, 60), rng.randint(2, 40)
            c = rng.randint(1, min(90, a + b - 1))  # every answer stays positive
            expression = solution.format(a=a, b=b, c=c)
            self._tasks.append(
                EnvTask(
                    external_id=f"arith-{seed}-{i}",
                    prompt=template.format(a=a, b=b, c=c),
                    reference=_format(calculate(expression)),
                    split=SPLIT_OF[i % len(SPLIT_OF)],
                    metadata={"environment": self.name, "seed": seed, "expression": expression},
                )
            )

    def tasks(self, split: str) -> list[EnvTask]:
        return [t for t in self._tasks if t.split == split]

    def tools(self) -> list[Tool]:
        return [
            Tool(
                "calculate",
                "Evaluate an arithmetic expression, e.g. 48 * 17 - 95.",
                {
                    "type": "object",
                    "properties": {"expression": {"type": "string", "minLength": 1}},
                    "required": ["expression"],
                    "additionalProperties": False,
                },
            ),
            ANSWER_TOOL,
        ]

    def start(self, task: EnvTask) -> _State:
        return _State(task=task, results=[])

    def call(self, state: _State, tool: str, arguments: dict) -> ToolResult:
        if tool == "answer":
            return ToolResult(arguments["text"], done=True, answer=arguments["text"])
        try:
            result = _format(calculate(arguments["expression"]))
        except CalculatorError as exc:
            return ToolResult(f"Error: {exc}.", error=True)
        state.results.append(result)
        return ToolResult(result)

    def demonstrator(self, *, seed: int = 0, **options):
        """A scripted solver for behaviour cloning: calculate the task's expression, answer the result."""

        def turns(task: EnvTask, state: _State):
            yield "calculate", {"expression": task.metadata["expression"]}
            yield "answer", {"text": state.results[-1] if state.results else ""}

        return turns

    def outcome(self, state: _State, episode: EpisodeRecord) -> Rubric:
        numbers = _NUMBER.findall(episode.answer or "")
        correct = bool(numbers) and float(numbers[-1]) == float(episode.task.reference)
        computed = episode.task.reference in state.results
        utility = episode_utility(correct, episode)
        return Rubric(
            correct=correct,
            utility=utility,
            parts={
                "steps": episode.calls,
                "tool_errors": episode.tool_errors,
                "loop": episode.loop,
                "answered": episode.answer is not None,
                "computed": computed,
            },
        )
