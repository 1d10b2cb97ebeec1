"""Building comparisons: pairs of different trajectories of the same task.

Strategies:
- `all_pairs`: every pair of a task's trajectories, up to `max_per_task` pairs per task,
  chosen in a random order fixed by `seed` so reruns pick the same pairs.
- `outcome_differs`: only pairs whose rubric outcomes are both known and differ (by
  `correct` where both have it, else by `utility`): the pairs a reward model learns most from.
- `same_calls_different_answer`: only pairs that made the same tool calls (the same tools
  with the same arguments, in any order) and gave different final answers: the answer is
  the only difference, so the pair teaches a reward model to check it against what was read.
Pairs already in the campaign are skipped, so building again only adds what is new.
`trajectory_ids` restricts the pairing to those trajectories (one rollout's, say).
"""
from __future__ import annotations

import json
import random
from collections import defaultdict
from itertools import combinations

from django.db import transaction
from django.db.models import Count

from annotate.models import Campaign, Comparison, Trajectory
from webapp.db import bulk_create_new
from webapp.errors import ArbiterError

STRATEGIES = ("all_pairs", "outcome_differs", "same_calls_different_answer")


def _calls_and_answer(steps: list[dict], answer: str) -> tuple[frozenset, str]:
    """The set of a trajectory's tool calls, each as (tool, arguments as sorted JSON), and its answer."""
    calls = set()
    for step in steps:
        if step.get("kind") == "action":
            calls.add((str(step.get("tool", "")), json.dumps(step.get("arguments"), sort_keys=True, default=str)))
    return frozenset(calls), " ".join(answer.split()).lower()


def _answer_is_the_difference(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and bool(a[0]) and a[1] != b[1]


def _outcomes_differ(a: dict | None, b: dict | None) -> bool:
    if not a or not b:
        return False
    if "correct" in a and "correct" in b:
        return bool(a["correct"]) != bool(b["correct"])
    if "utility" in a and "utility" in b:
        return a["utility"] != b["utility"]
    return False


@transaction.atomic
def comparisons_build(
    *,
    campaign: Campaign,
    strategy: str = "all_pairs",
    max_per_task: int = 10,
    task_ids: list[int] | None = None,
    trajectory_ids: list[int] | None = None,
    seed: int = 0,
) -> int:
    """Add comparisons to `campaign`; returns how many were created."""
    if strategy not in STRATEGIES:
        raise ArbiterError(f"Unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}.")
    if max_per_task < 1:
        raise ArbiterError("max_per_task must be at least 1.")
    fields = ("id", "task_id", "outcome") + (("steps", "answer") if strategy == "same_calls_different_answer" else ())
    rows = Trajectory.objects.order_by("task_id", "id").values_list(*fields)
    if task_ids is not None:
        rows = rows.filter(task_id__in=task_ids)
    if trajectory_ids is not None:
        rows = rows.filter(pk__in=trajectory_ids)
    by_task: dict[int, list[tuple[int, object]]] = defaultdict(list)
    for row in rows.iterator(chunk_size=5000):
        key = _calls_and_answer(row[3], row[4]) if strategy == "same_calls_different_answer" else row[2]
        by_task[row[1]].append((row[0], key))
    keep = {"all_pairs": lambda a, b: True, "outcome_differs": _outcomes_differ,
            "same_calls_different_answer": _answer_is_the_difference}[strategy]

    existing_count = dict(
        Comparison.objects.filter(campaign=campaign, task_id__in=list(by_task))
        .values_list("task_id")
        .annotate(n=Count("id"))
    )
    existing_pairs = set(
        Comparison.objects.filter(campaign=campaign, task_id__in=list(by_task)).values_list(
            "trajectory_a_id", "trajectory_b_id"
        )
    )
    rng = random.Random(seed)
    new: list[Comparison] = []
    for task_id, trajectories in by_task.items():
        room = max_per_task - existing_count.get(task_id, 0)
        if room <= 0 or len(trajectories) < 2:
            continue
        pairs = [
            (a, b)
            for a, b in combinations(trajectories, 2)
            if (a[0], b[0]) not in existing_pairs
            and keep(a[1], b[1])
        ]
        rng.shuffle(pairs)
        for (a_id, _), (b_id, _) in pairs[:room]:
            new.append(
                Comparison(campaign=campaign, task_id=task_id, trajectory_a_id=a_id, trajectory_b_id=b_id)
            )
    inserted = bulk_create_new(
        Comparison, new, key=lambda c: (c.trajectory_a_id, c.trajectory_b_id),
        stored_keys=lambda keys: Comparison.objects.filter(
            campaign=campaign, trajectory_a_id__in={a for a, _ in keys}, trajectory_b_id__in={b for _, b in keys},
        ).values_list("trajectory_a_id", "trajectory_b_id"),
    )
    return len(inserted)
