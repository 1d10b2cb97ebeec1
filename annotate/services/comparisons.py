"""Building comparisons: pairs of different trajectories of the same task.

Strategies:
- `all_pairs`: every pair of a task's trajectories, up to `max_per_task` pairs per task,
  chosen in a random order fixed by `seed` so reruns pick the same pairs.
- `outcome_differs`: only pairs whose rubric outcomes are both known and differ (by
  `correct` where both have it, else by `utility`): the pairs a reward model learns most from.
- `policy_vs_policy`: one trajectory of `policy_a` against one of `policy_b` on the same
  task (an A/B test of two agents, the arena case).
- `same_calls_different_answer`: only pairs that made the same tool calls (the same tools
  with the same arguments, in any order) and gave different final answers: the answer is
  the only difference, so the pair teaches a reward model to check it against what was read.

Whatever the strategy, two trajectories with the same steps and answer (the same
behaviour stored under two agent names) are never paired: there is nothing to judge.
Pairs already in the campaign are skipped and count against `max_per_task`, so building
again only adds what is new. `comparisons_pairs` streams the new pairs task by task
(counting what it leaves out), `comparisons_plan` collects them without writing (the
preview), `comparisons_insert` writes them in chunks.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import combinations, islice, product

from django.db import connection, transaction
from django.db.models import Count, QuerySet

from annotate.models import Campaign, Comparison, Trajectory
from core.same_behaviour import answer_key, call_key
from webapp.db import bulk_create_new, insert_new_rows
from webapp.errors import ArbiterError

STRATEGIES = ("all_pairs", "outcome_differs", "policy_vs_policy", "same_calls_different_answer")
# Strategies that need nothing but the trajectories (a rollout pairs its own episodes with these).
SELF_PAIRING = ("all_pairs", "outcome_differs", "same_calls_different_answer")


def _calls_and_answer(steps: list[dict], answer: str) -> tuple[frozenset, str]:
    """The set of a trajectory's tool calls, each as (tool, arguments as sorted JSON), and its answer."""
    calls = {call_key(step.get("tool", ""), step.get("arguments")) for step in steps if step.get("kind") == "action"}
    return frozenset(calls), answer_key(answer)


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


@dataclass
class _Row:
    id: int
    policy_id: int
    behaviour: str
    key: object  # what the strategy compares: the outcome, or (calls, answer)


@dataclass
class PairPlan:
    """What a build adds: its counts, and (`pairs`) the new pairs (task, a, b) in id order."""

    pairs: list[tuple[int, int, int]] = field(default_factory=list)
    trajectories: int = 0
    tasks: int = 0
    new: int = 0  # pairs to create
    existing: int = 0  # candidate pairs the campaign has already
    identical: int = 0  # candidate pairs refused: the same steps and answer
    capped: int = 0  # candidate pairs left out by max_per_task
    sampled_tasks: int = 0  # tasks with more than SAMPLE_ABOVE candidate pairs: drawn at random, not listed

    def as_dict(self) -> dict:
        return {
            "comparisons": self.new,
            "trajectories": self.trajectories,
            "tasks": self.tasks,
            "already_in_campaign": self.existing,
            "identical_refused": self.identical,
            "left_out_by_cap": self.capped,
            "sampled_tasks": self.sampled_tasks,
        }


# A task with more candidate pairs than this (about 320 trajectories of one task) has its pairs
# drawn at random up to the cap instead of listed: 4,000 trajectories of one task are 8 million
# pairs, which a preview must not build. Its `left_out_by_cap` then counts every pair not drawn.
SAMPLE_ABOVE = 50_000


def _check(strategy: str, max_per_task: int, policy_a: int | None, policy_b: int | None) -> None:
    if strategy not in STRATEGIES:
        raise ArbiterError(f"Unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}.")
    if max_per_task < 1:
        raise ArbiterError("max_per_task must be at least 1.")
    if strategy == "policy_vs_policy":
        if not policy_a or not policy_b:
            raise ArbiterError("policy_vs_policy needs two policies: policy_a and policy_b.")
        if policy_a == policy_b:
            raise ArbiterError("policy_vs_policy needs two different policies.")


TASKS_PER_BLOCK = 500  # tasks whose stored pairs are read in one query


def comparisons_pairs(
    *,
    campaign: Campaign,
    plan: PairPlan,
    trajectories: QuerySet[Trajectory] | None = None,
    strategy: str = "all_pairs",
    max_per_task: int = 10,
    policy_a: int | None = None,
    policy_b: int | None = None,
    tags: list[str] = (),
    seed: int = 0,
) -> Iterator[tuple[int, int, int]]:
    """The new pairs (task, a, b) a build of `trajectories` (default: all stored) adds to
    `campaign`, task by task, counting into `plan` as it goes.

    Streams: the rows are read in task order and only a block of tasks is held at once, so
    memory stays flat however many trajectories are selected.
    """
    _check(strategy, max_per_task, policy_a, policy_b)
    rows = (trajectories if trajectories is not None else Trajectory.objects.all()).order_by("task_id", "id")
    if strategy == "policy_vs_policy":
        rows = rows.filter(policy_id__in=[policy_a, policy_b])
    fields = ["id", "task_id", "policy_id", "behaviour_hash", "outcome"]
    if strategy == "same_calls_different_answer":
        fields += ["steps", "answer"]
    if tags:
        fields.append("metadata__tags")
    wanted_tags = set(tags)
    rng = random.Random(seed)
    block: dict[int, list[_Row]] = {}
    for values in rows.values_list(*fields).iterator(chunk_size=2000):
        row = dict(zip(fields, values))
        if wanted_tags:
            found = row["metadata__tags"]
            if not isinstance(found, list) or not wanted_tags.intersection(t for t in found if isinstance(t, str)):
                continue
        if row["task_id"] not in block and len(block) >= TASKS_PER_BLOCK:
            yield from _block_pairs(campaign, block, strategy, max_per_task, policy_a, policy_b, rng, plan)
            block = {}
        key = (
            _calls_and_answer(row["steps"], row["answer"])
            if strategy == "same_calls_different_answer"
            else row["outcome"]
        )
        block.setdefault(row["task_id"], []).append(_Row(row["id"], row["policy_id"], row["behaviour_hash"], key))
        plan.trajectories += 1
    yield from _block_pairs(campaign, block, strategy, max_per_task, policy_a, policy_b, rng, plan)


def _block_pairs(
    campaign, block: dict[int, list[_Row]], strategy, max_per_task, policy_a, policy_b, rng, plan: PairPlan
) -> Iterator[tuple[int, int, int]]:
    if not block:
        return
    keep: Callable[[object, object], bool] = {
        "all_pairs": lambda a, b: True,
        "policy_vs_policy": lambda a, b: True,
        "outcome_differs": _outcomes_differ,
        "same_calls_different_answer": _answer_is_the_difference,
    }[strategy]
    in_campaign = Comparison.objects.filter(campaign=campaign, task_id__in=list(block))
    existing_count = dict(in_campaign.values_list("task_id").annotate(n=Count("id")))
    existing_pairs = set(in_campaign.values_list("trajectory_a_id", "trajectory_b_id"))
    for task_id, found in block.items():
        plan.tasks += 1
        room = max(0, max_per_task - existing_count.get(task_id, 0))
        if strategy == "policy_vs_policy":
            sides = ([r for r in found if r.policy_id == policy_a], [r for r in found if r.policy_id == policy_b])
            count = len(sides[0]) * len(sides[1])
            candidates = product(*sides)
        else:
            sides = None
            count = len(found) * (len(found) - 1) // 2
            candidates = combinations(found, 2)
        if count > SAMPLE_ABOVE:
            plan.sampled_tasks += 1
            pairs = _drawn(found, sides, room, keep, existing_pairs, rng, plan, keyed=strategy != "all_pairs")
            plan.capped += count - len(pairs)
            plan.new += len(pairs)
            for a, b in pairs:
                yield task_id, a, b
            continue
        pairs = []
        for a, b in candidates:
            if a.behaviour and a.behaviour == b.behaviour:
                plan.identical += 1
                continue
            if not keep(a.key, b.key):
                continue
            ids = (min(a.id, b.id), max(a.id, b.id))
            if ids in existing_pairs:
                plan.existing += 1
                continue
            pairs.append(ids)
        pairs.sort()
        rng.shuffle(pairs)
        plan.capped += max(0, len(pairs) - room)
        plan.new += min(room, len(pairs))
        for a, b in pairs[:room]:
            yield task_id, a, b


def _drawn(
    found: list[_Row], sides, room: int, keep, existing_pairs: set, rng: random.Random, plan: PairPlan, *, keyed: bool
) -> list[tuple[int, int]]:
    """Up to `room` pairs drawn at random from a task too large to list, never materialising its
    pairs: the second trajectory is drawn among those whose key differs from the first's when the
    strategy compares keys, so rare differing pairs are still found. Bounded by attempts."""
    if sides is not None:

        def propose():
            return rng.choice(sides[0]), rng.choice(sides[1])
    else:
        groups: dict[str, list[_Row]] = {}
        for row in found:
            groups.setdefault(json.dumps(row.key, sort_keys=True, default=str), []).append(row)
        keyed = keyed and len(groups) > 1

        def propose():
            a = rng.choice(found)
            if not keyed:
                return a, rng.choice(found)
            mine = json.dumps(a.key, sort_keys=True, default=str)
            others = [g for k, g in groups.items() if k != mine]
            return (a, rng.choice(rng.choice(others))) if others else (a, a)

    chosen: set[tuple[int, int]] = set()
    for _ in range(50 * room + 1000):
        if len(chosen) >= room:
            break
        a, b = propose()
        ids = (min(a.id, b.id), max(a.id, b.id))
        if a.id == b.id or ids in chosen or not keep(a.key, b.key):
            continue
        if a.behaviour and a.behaviour == b.behaviour:
            plan.identical += 1
            continue
        if ids in existing_pairs:
            plan.existing += 1
            continue
        chosen.add(ids)
    return sorted(chosen)


def comparisons_plan(*, campaign: Campaign, **selection) -> PairPlan:
    """What a build would add (the preview), with its pairs; `comparisons_pairs` takes the same arguments."""
    plan = PairPlan()
    plan.pairs = list(comparisons_pairs(campaign=campaign, plan=plan, **selection))
    return plan


def comparisons_insert(
    *,
    campaign: Campaign,
    pairs: Iterable[tuple[int, int, int]],
    progress: Callable[[], None] | None = None,
    chunk: int | None = None,
) -> int:
    """Write pairs (each chunk in its own transaction); returns how many were new.

    On PostgreSQL a chunk (20,000 pairs) goes in by COPY and one INSERT ... SELECT ... ON
    CONFLICT DO NOTHING (webapp/db.py `insert_new_rows`), with no model object per pair;
    elsewhere (SQLite, the embedded mode) by `bulk_create` in chunks of 2,000."""
    created = 0
    pairs = iter(pairs)
    if connection.vendor == "postgresql":
        while batch := list(islice(pairs, chunk or 20_000)):
            with transaction.atomic():
                created += insert_new_rows(
                    Comparison,
                    ("task_id", "trajectory_a_id", "trajectory_b_id"),
                    batch,
                    constants={"campaign_id": campaign.pk},
                    conflict=("campaign_id", "trajectory_a_id", "trajectory_b_id"),
                )
            if progress:
                progress()
        return created
    chunk = chunk or 2000
    while True:
        batch = list(islice(pairs, chunk))
        if not batch:
            return created
        new = [Comparison(campaign=campaign, task_id=t, trajectory_a_id=a, trajectory_b_id=b) for t, a, b in batch]
        # Stored pairs are looked up through the chunk's tasks (an index), not the whole campaign.
        tasks = {t for t, _, _ in batch}
        with transaction.atomic():
            created += len(
                bulk_create_new(
                    Comparison,
                    new,
                    key=lambda c: (c.trajectory_a_id, c.trajectory_b_id),
                    stored_keys=lambda keys: Comparison.objects.filter(
                        campaign=campaign,
                        task_id__in=tasks,
                        trajectory_a_id__in={a for a, _ in keys},
                        trajectory_b_id__in={b for _, b in keys},
                    ).values_list("trajectory_a_id", "trajectory_b_id"),
                )
            )
        if progress:
            progress()


@transaction.atomic
def comparisons_build(
    *,
    campaign: Campaign,
    strategy: str = "all_pairs",
    max_per_task: int = 10,
    task_ids: list[int] | None = None,
    trajectory_ids: list[int] | None = None,
    policy_a: int | None = None,
    policy_b: int | None = None,
    seed: int = 0,
) -> int:
    """Add comparisons to `campaign` (of these tasks or trajectories); returns how many were created."""
    rows = Trajectory.objects.all()
    if task_ids is not None:
        rows = rows.filter(task_id__in=task_ids)
    if trajectory_ids is not None:
        rows = rows.filter(pk__in=trajectory_ids)
    pairs = comparisons_pairs(
        campaign=campaign,
        plan=PairPlan(),
        trajectories=rows,
        strategy=strategy,
        max_per_task=max_per_task,
        policy_a=policy_a,
        policy_b=policy_b,
        seed=seed,
    )
    return comparisons_insert(campaign=campaign, pairs=pairs)
