"""Django glue for reward models: train from a snapshot, evaluate, register, score, order queues.

The ML lives in train.py, evaluate.py and scoring.py (no Django); this module feeds them
rows from the database and stores what they return.
"""

from __future__ import annotations

import random
import shutil
from collections import defaultdict
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from annotate.agreement import pairwise_agreement
from annotate.exports import iter_rows
from annotate.models import (
    Campaign,
    Comparison,
    DatasetSnapshot,
    Judgement,
    Policy,
    SnapshotJudgement,
    SnapshotPair,
    Trajectory,
)
from annotate.preferences import FEEDBACK_WORDS, MIN_TEST_PAIRS, MIN_TRAIN_PAIRS, fed_by
from rewardmodel.evaluate import ordering_accuracy, pair_metrics
from rewardmodel.models import CampaignRewardModel, ComparisonScore, RewardModel
from rewardmodel.probes import Probed, answer_swap_accuracy, answer_swap_pairs
from webapp.errors import ArbiterError

FRESH_PAIRS = 400  # fresh policy pairs scored at most, for the on-policy accuracy


def registry_dir() -> Path:
    return Path(settings.VAR_DIR) / "reward_models"


def default_tokenizer_dir(eval_policy_id: int = 0) -> str:
    """The tokenizer a policy-llama reward model shares: the policy it will be used on when
    given, else the newest behaviour-cloned default policy ("" when there is none)."""
    policies = Policy.objects.exclude(model_dir="")
    policy = (policies.filter(pk=eval_policy_id).first() if eval_policy_id else None) or policies.filter(
        name="default-bc"
    ).order_by("-created_at").first()
    return policy.model_dir if policy else ""


# --- Training and evaluation -------------------------------------------------------------


def snapshot_problems(snapshot_id: int, *, feedback: str = "both") -> list[str]:
    snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        return [f"No dataset snapshot with id {snapshot_id}."]
    if snapshot.status != DatasetSnapshot.Status.SUCCEEDED:
        return [f"Snapshot {snapshot} is {snapshot.status}, not ready."]
    pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie")
    if feedback not in FEEDBACK_WORDS:
        feedback = "both"  # the config's own check names a bad value; count every pair here
    if feedback != "both":
        pairs = pairs.filter(source=feedback)
    train, test = pairs.filter(split="train").count(), pairs.filter(split="test").count()
    of = "" if feedback == "both" else f" from {FEEDBACK_WORDS[feedback]}"
    problems = []
    if train < MIN_TRAIN_PAIRS:
        problems.append(
            f"Snapshot {snapshot} has {train} training pairs{of} that are not ties; "
            f"a reward model needs at least {MIN_TRAIN_PAIRS}."
        )
    if test < MIN_TEST_PAIRS:
        problems.append(
            f"Snapshot {snapshot} has {test} test pairs{of} that are not ties; evaluation needs at least "
            f"{MIN_TEST_PAIRS} (raise its test fraction)."
        )
    return problems


def human_agreement(snapshot: DatasetSnapshot, split: str = "test") -> dict:
    """How often two annotators of the same comparison agree: the ceiling for a model's accuracy."""
    units = defaultdict(list)
    for comparison_id, choice in SnapshotJudgement.objects.filter(snapshot=snapshot, split=split).values_list(
        "judgement__comparison_id", "judgement__choice"
    ):
        units[comparison_id].append(choice)
    agreement = pairwise_agreement(list(units.values()))
    return {
        "pairwise_excluding_ties": agreement.excluding_ties,
        "pairwise_tie_as_half": agreement.tie_as_half,
        "pairs_of_votes": agreement.pairs,
    }


def _utility(trajectory_outcome: dict | None) -> float | None:
    return (trajectory_outcome or {}).get("utility")


def test_pairs_with_truth(snapshot: DatasetSnapshot) -> list[dict]:
    """Test pairs (ties left out) with the rubric utilities of the chosen and rejected sides, where known."""
    rows = []
    pairs = (
        SnapshotPair.objects.filter(snapshot=snapshot, split="test")
        .exclude(preferred="tie")
        .order_by("comparison_id")
        .values_list(
            "comparison_id",
            "preferred",
            "margin",
            "agreement",
            "comparison__trajectory_a__outcome",
            "comparison__trajectory_b__outcome",
        )
    )
    for comparison_id, preferred, margin, agreement, outcome_a, outcome_b in pairs:
        chosen, rejected = (outcome_b, outcome_a) if preferred == "B" else (outcome_a, outcome_b)
        rows.append(
            {
                "comparison_id": comparison_id,
                "margin": margin,
                "agreement": agreement,
                "utility_chosen": _utility(chosen),
                "utility_rejected": _utility(rejected),
            }
        )
    return rows


def labels_vs_rubric(truth: list[dict]) -> dict:
    """How often the (aggregated) labels pick the side with the higher rubric utility."""
    known = [
        t
        for t in truth
        if t["utility_chosen"] is not None
        and t["utility_rejected"] is not None
        and t["utility_chosen"] != t["utility_rejected"]
    ]
    if not known:
        return {"accuracy": None, "n": 0}
    return {"accuracy": sum(t["utility_chosen"] > t["utility_rejected"] for t in known) / len(known), "n": len(known)}


def fresh_policy_pairs(
    policy: Policy, exclude_task_ids: set[int], *, limit: int = FRESH_PAIRS, seed: int = 0
) -> list[tuple[Trajectory, Trajectory]]:
    """Pairs of the policy's own trajectories on tasks not trained on, whose rubric utilities differ."""
    by_task = defaultdict(list)
    for t in Trajectory.objects.filter(policy=policy).exclude(task_id__in=exclude_task_ids).select_related("task"):
        if _utility(t.outcome) is not None:
            by_task[t.task_id].append(t)
    pairs = []
    for trajectories in by_task.values():
        for i, a in enumerate(trajectories):
            for b in trajectories[i + 1 :]:
                if _utility(a.outcome) != _utility(b.outcome):
                    pairs.append((a, b))
    random.Random(seed).shuffle(pairs)
    return pairs[:limit]


def probe_trajectories(snapshot: DatasetSnapshot, eval_policy: Policy | None, train_tasks: set[int]) -> list[Probed]:
    """Held-out trajectories whose correctness is known: both sides of the snapshot's test pairs,
    and the evaluation policy's own on tasks the reward model did not train on."""
    test = SnapshotPair.objects.filter(snapshot=snapshot, split="test")
    ids = set(test.values_list("comparison__trajectory_a_id", flat=True)) | set(
        test.values_list("comparison__trajectory_b_id", flat=True)
    )
    query = Trajectory.objects.filter(pk__in=ids)
    if eval_policy is not None:
        query = query | Trajectory.objects.filter(policy=eval_policy).exclude(task_id__in=train_tasks)
    return [
        Probed(task=t.task_id, prompt=t.task.prompt, steps=t.steps, correct=bool(t.outcome["correct"]))
        for t in query.select_related("task").order_by("pk")[:5000]
        if isinstance(t.outcome, dict) and "correct" in t.outcome
    ]


def evaluate_reward_model(
    *, scorer, snapshot: DatasetSnapshot, eval_policy: Policy | None, seed: int = 0, feedback: str = "both"
) -> dict:
    """Every held-out figure of a reward model, read against its ceilings; the test pairs of the
    feedback it trained on (people's, judges' or both)."""
    test_rows = list(iter_rows(snapshot, "trl", split="test"))
    test_rows = [r for r in test_rows if r["preferred"] != "tie" and fed_by(r["source"], feedback)]
    chosen, rejected = scorer.score_pairs(test_rows)
    truth = {t["comparison_id"]: t for t in test_pairs_with_truth(snapshot)}
    metrics = {
        "test": pair_metrics(
            chosen, rejected, margins=[r["margin"] for r in test_rows], votes=[r["votes"] for r in test_rows]
        )
    }
    rubric_rows = []
    for row, c, r in zip(test_rows, chosen, rejected):
        t = truth.get(row["comparison_id"])
        if t and t["utility_chosen"] is not None and t["utility_rejected"] is not None:
            rubric_rows.append((c, r, t["utility_chosen"], t["utility_rejected"]))
    metrics["rubric"] = ordering_accuracy(rubric_rows) if rubric_rows else None
    metrics["labels_vs_rubric"] = labels_vs_rubric(list(truth.values()))
    metrics["human_agreement"] = human_agreement(snapshot)
    metrics["feedback"] = {
        "trained_on": feedback,
        "words": FEEDBACK_WORDS[feedback],
        **snapshot.stats.get("sources", {}),
    }
    train_tasks = set(SnapshotPair.objects.filter(snapshot=snapshot, split="train").values_list("task_id", flat=True))
    metrics["answer_swap"] = answer_swap_accuracy(
        scorer, answer_swap_pairs(probe_trajectories(snapshot, eval_policy, train_tasks), seed=seed)
    )
    if eval_policy is not None:
        pairs = fresh_policy_pairs(eval_policy, train_tasks, seed=seed)
        if pairs:
            items = [(t.task.prompt, t.steps) for pair in pairs for t in pair]
            scores = scorer.score_episodes(items)
            rows = [
                (scores[2 * i], scores[2 * i + 1], _utility(a.outcome), _utility(b.outcome))
                for i, (a, b) in enumerate(pairs)
            ]
            metrics["policy_pairs"] = {**ordering_accuracy(rows), "policy": str(eval_policy)}
        else:
            metrics["policy_pairs"] = {
                "accuracy": None,
                "n": 0,
                "policy": str(eval_policy),
                "note": "the policy has no trajectories with different outcomes on held-out tasks; run rollouts first",
            }
    return metrics


@transaction.atomic
def reward_model_register(
    *, run, name: str, snapshot: DatasetSnapshot, config: dict, trained_dir: Path, metrics: dict, created_by
) -> RewardModel:
    """Record the finished model and move its files into the registry folder, all or nothing.

    The row is written (and its constraints checked) first, then the files are moved: a
    failure at either step rolls the row back and leaves no folder in the registry.
    """
    target = registry_dir() / f"run{run.pk}-{name}"
    model = RewardModel.objects.create(
        name=name,
        snapshot=snapshot,
        run=run,
        backbone=config["backbone"],
        model_dir=str(target),
        config=config,
        metrics=metrics,
        created_by=created_by,
    )
    if connection.vendor == "postgresql":  # foreign keys are checked at commit unless asked now
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    try:
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(trained_dir), str(target))
    except Exception:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return model


# --- Scoring and queue order ---------------------------------------------------------------


def campaign_reward_model_set(*, campaign: Campaign, reward_model: RewardModel, user) -> CampaignRewardModel:
    choice, _ = CampaignRewardModel.objects.update_or_create(
        campaign=campaign, defaults={"reward_model": reward_model, "chosen_by": user}
    )
    return choice


def comparisons_score(*, reward_model: RewardModel, campaign: Campaign, scorer, progress=None) -> int:
    """Score both sides of every comparison of a campaign; stores the margins (A minus B)."""
    comparisons = list(
        Comparison.objects.filter(campaign=campaign)
        .select_related("task", "trajectory_a", "trajectory_b")
        .order_by("id")
    )
    batch = 64
    stored = 0
    for start in range(0, len(comparisons), batch):
        chunk = comparisons[start : start + batch]
        items = [(c.task.prompt, t.steps) for c in chunk for t in (c.trajectory_a, c.trajectory_b)]
        scores = scorer.score_episodes(items)
        rows = [
            ComparisonScore(
                reward_model=reward_model,
                comparison=c,
                score_a=scores[2 * i],
                score_b=scores[2 * i + 1],
                margin=scores[2 * i] - scores[2 * i + 1],
            )
            for i, c in enumerate(chunk)
        ]
        ComparisonScore.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["reward_model", "comparison"],
            update_fields=["score_a", "score_b", "margin"],
        )
        stored += len(rows)
        if progress:
            progress(stored / max(1, len(comparisons)))
    return stored


ORDERS = ("closest", "disagree", "none")


def campaign_order_by_uncertainty(*, campaign: Campaign, reward_model: RewardModel, order: str) -> int:
    """Set the queue priority of a campaign's open comparisons from the model's margins.

    closest: pairs the model finds closest first. disagree: pairs whose votes so far go
    against the model first (then the closest). none: back to plain order (priority 0).
    Gold comparisons keep their priority.
    """
    if order not in ORDERS:
        raise ArbiterError(f"order: one of {', '.join(ORDERS)}.")
    open_comparisons = Comparison.objects.filter(campaign=campaign, is_gold=False, status=Comparison.Status.OPEN)
    if order == "none":
        return open_comparisons.update(priority=0.0)
    margins = dict(
        ComparisonScore.objects.filter(reward_model=reward_model, comparison__in=open_comparisons).values_list(
            "comparison_id", "margin"
        )
    )
    if not margins:
        raise ArbiterError(f"{reward_model} has not scored campaign {campaign.name} yet; score it first.")
    leaning = defaultdict(int)  # > 0: votes so far lean to A
    if order == "disagree":
        for comparison_id, choice in Judgement.objects.filter(comparison_id__in=margins).values_list(
            "comparison_id", "choice"
        ):
            leaning[comparison_id] += (choice < 3) - (choice > 3)
    updates = []
    for comparison in open_comparisons.filter(pk__in=margins).only("id", "priority"):
        margin = margins[comparison.pk]
        closeness = 1.0 / (1.0 + abs(margin))  # in (0, 1]: 1 when the model cannot tell
        disagrees = leaning[comparison.pk] * margin < 0
        comparison.priority = closeness + (1.0 if disagrees else 0.0)
        updates.append(comparison)
    Comparison.objects.bulk_update(updates, ["priority"], batch_size=1000)
    return len(updates)
