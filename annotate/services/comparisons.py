"""Building comparisons: pairs of different trajectories of the same task.

Strategies:
- `all_pairs`: every pair of a task's trajectories, up to `max_per_task` pairs per task,
  chosen in a random order fixed by `seed` so reruns pick the same pairs.
- `outcome_differs`: only pairs whose rubric outcomes are both known and differ (by
  `correct` where both have it, else by `utility`): the pairs a reward model learns most from.
Pairs already in the campaign are skipped, so building again only adds what is new.
"""
from __future__ import annotations

import random
from collections import defaultdict
from itertools import combinations

from django.db import transaction
from django.db.models import Count

from annotate.models import Campaign, Comparison, Trajectory
from webapp.db import bulk_create_new
from webapp.errors import ArbiterError

STRATEGIES = ("all_pairs", "outcome_differs")


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
    seed: int = 0,
) -> int:
    """Add comparisons to `campaign`; returns how many were created."""
    if strategy not in STRATEGIES:
        raise ArbiterError(f"Unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}.")
    if max_per_task < 1:
        raise ArbiterError("max_per_task must be at least 1.")
    rows = Trajectory.objects.order_by("task_id", "id").values_list("id", "task_id", "outcome")
    if task_ids is not None:
        rows = rows.filter(task_id__in=task_ids)
    by_task: dict[int, list[tuple[int, dict | None]]] = defaultdict(list)
    for traj_id, task_id, outcome in rows.iterator(chunk_size=5000):
        by_task[task_id].append((traj_id, outcome))

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
            and (strategy == "all_pairs" or _outcomes_differ(a[1], b[1]))
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
