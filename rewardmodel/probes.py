"""Probes of what a reward model looks at (plain Python).

Answer swap: a trajectory and its copy with only the final answer changed, one side right and
the other wrong. Every step, every page read and every quote is the same, so a reward model
that prefers the right side checks the answer against what the agent read; one at chance
scores the path and not the answer (the audit that opened issue 16 found both of Arbiter's
reward models at 57-58% here).

    pairs = answer_swap_pairs(trajectories)           # [(prompt, right_steps, wrong_steps)]
    answer_swap_accuracy(scorer, pairs)               # {"accuracy", "accuracy_ci", "n"}
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from rewardmodel.evaluate import ordering_accuracy

SWAP_PAIRS = 200  # at most this many pairs per probe


@dataclass(frozen=True)
class Probed:
    """A stored trajectory as the probe needs it."""

    task: object  # anything hashable that names the task
    prompt: str
    steps: list[dict]
    correct: bool


def _answer(steps: list[dict]) -> str | None:
    return next((s["text"] for s in reversed(steps) if s.get("kind") == "answer"), None)


def _with_answer(steps: list[dict], answer: str) -> list[dict]:
    swapped, done = [], False
    for step in reversed(steps):
        if not done and step.get("kind") == "answer":
            step, done = {**step, "text": answer}, True
        swapped.append(step)
    return swapped[::-1]


def answer_swap_pairs(
    trajectories: list[Probed], *, limit: int = SWAP_PAIRS, seed: int = 0
) -> list[tuple[str, list[dict], list[dict]]]:
    """(prompt, right steps, wrong steps) pairs that differ only in the final answer.

    For each task with a right and a wrong answer among its trajectories: every trajectory is
    paired with its own copy carrying the other answer (a right one gets a wrong answer of
    its task, a wrong one the right answer), so both directions of the swap are probed."""
    by_task: dict[object, list[Probed]] = defaultdict(list)
    for t in trajectories:
        if _answer(t.steps) is not None:
            by_task[t.task].append(t)
    pairs = []
    for group in by_task.values():
        right = {_answer(t.steps) for t in group if t.correct}
        wrong = sorted({_answer(t.steps) for t in group if not t.correct} - right)
        if not right or not wrong:
            continue
        correct_answer = sorted(right)[0]
        for t in group:
            if t.correct:
                pairs.append((t.prompt, t.steps, _with_answer(t.steps, wrong[0])))
            elif _answer(t.steps) not in right:
                pairs.append((t.prompt, _with_answer(t.steps, correct_answer), t.steps))
    random.Random(seed).shuffle(pairs)
    return pairs[:limit]


def answer_swap_accuracy(scorer, pairs: list[tuple[str, list[dict], list[dict]]]) -> dict:
    """How often the reward model scores the right-answer side higher (ties count half), with a
    95% bootstrap interval over pairs. `scorer.score_episodes([(prompt, steps), ...])`."""
    if not pairs:
        return {
            "n": 0,
            "accuracy": None,
            "accuracy_ci": None,
            "note": "no task has both a right and a wrong answer among these trajectories",
        }
    scores = scorer.score_episodes(
        [item for prompt, right, wrong in pairs for item in ((prompt, right), (prompt, wrong))]
    )
    result = ordering_accuracy((scores[2 * i], scores[2 * i + 1], 1.0, 0.0) for i in range(len(pairs)))
    return {key: result[key] for key in ("n", "accuracy", "accuracy_ci")}
