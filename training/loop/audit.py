"""The audit of a round: what the new reward model loves, shown blind to people.

Two kinds of comparison go into a campaign of the round's own:

- top: the reward model's favourite episodes of the round's policy (on each held-out task,
  its highest-scored sample; then the highest-scored tasks first), each against the start
  policy's episode of the same task. If people prefer the favourites, the model loves what
  is good; if they prefer the start, the policy has found what the model wrongly loves.
- disagreement: the labelled pairs of the loop where the reward model's preference goes
  most strongly against the people's majority, asked again: people siding with the earlier
  labels means the model learnt something the labels did not teach.

The campaign is blind like every campaign: a comparison stores its trajectories in id order,
the workbench shuffles the sides per annotator, and the guidelines name neither the model
nor the policies. Which side is the model's favourite is kept in `AuditItem`, for the result.
The audit's comparisons are of held-out tasks (top) or of pairs already in the training
labels (disagreement), so the audit campaign is never added to a later round's dataset.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import transaction

from annotate.models import Campaign, Comparison, Judgement, choice_direction
from core.votes import SIDE, majority_of_choices
from training.evaluation.episodes import task_bootstrap
from training.models import AuditItem, EvaluationEpisode, LoopRound
from webapp.errors import ArbiterError

AUDIT_GUIDELINES = """\
**Audit.** Each comparison shows two attempts at the same question. Judge them as you would any
comparison: a correct, supported answer first, then fewer wasted steps and no tool errors. Use
*tie* only when neither is better, and mark **both bad** when neither answer is acceptable.
"""


def _majority(campaign_ids: list[int]) -> dict[int, str]:
    """The majority side ('A', 'B' or 'tie', the one rule of `core.votes`) of every judged
    comparison of the campaigns."""
    votes: dict[int, list[int]] = defaultdict(list)
    for comparison_id, choice in Judgement.objects.filter(comparison__campaign_id__in=campaign_ids).values_list(
        "comparison_id", "choice"
    ):
        votes[comparison_id].append(choice)
    return {comparison_id: SIDE[majority_of_choices(choices)] for comparison_id, choices in votes.items()}


def top_candidates(loop_round: LoopRound, size: int) -> list[dict]:
    """The reward model's favourite sampled episode of the round's policy on each evaluated
    task, highest score first, each with the start policy's sample-0 episode of that task
    (tasks where the two did exactly the same are left out)."""
    evaluation = loop_round.evaluation
    baseline = evaluation.entries.get(is_baseline=True)
    candidate = evaluation.entries.filter(policy=loop_round.policy, is_baseline=False, n=1).first()
    if candidate is None:
        return []
    best: dict[int, EvaluationEpisode] = {}
    for episode in EvaluationEpisode.objects.filter(
        entry=candidate, mode="sampled", rm_score__isnull=False
    ).select_related("trajectory"):
        if episode.task_id not in best or episode.rm_score > best[episode.task_id].rm_score:
            best[episode.task_id] = episode
    start = {
        e.task_id: e
        for e in EvaluationEpisode.objects.filter(
            entry=baseline, mode="sampled", sample=0, rm_score__isnull=False
        ).select_related("trajectory")
    }
    found = []
    for episode in sorted(best.values(), key=lambda e: (-e.rm_score, e.task_id)):
        other = start.get(episode.task_id)
        if other is None:
            continue
        a, b = episode.trajectory, other.trajectory
        if a.pk == b.pk or (a.steps == b.steps and a.answer == b.answer):
            continue
        found.append(
            {
                "task_id": episode.task_id,
                "favourite": a,
                "other": b,
                "favourite_score": episode.rm_score,
                "other_score": other.rm_score,
            }
        )
        if len(found) == size:
            break
    return found


def disagreement_candidates(loop_round: LoopRound, size: int, scores: dict[int, tuple[float, float]]) -> list[dict]:
    """Labelled comparisons of the loop's campaigns whose majority goes against the reward
    model's margin, the largest margins first. `scores`: comparison id -> (score A, score B)."""
    campaign_ids = list(
        LoopRound.objects.filter(
            loop=loop_round.loop, number__lte=loop_round.number, campaign__isnull=False
        ).values_list("campaign_id", flat=True)
    )
    majority = _majority(campaign_ids)
    comparisons = Comparison.objects.filter(pk__in=[c for c in majority if c in scores]).select_related(
        "trajectory_a", "trajectory_b"
    )
    found = []
    for comparison in comparisons:
        score_a, score_b = scores[comparison.pk]
        label = majority[comparison.pk]
        if label == "tie" or (score_a > score_b) == (label == "A") or score_a == score_b:
            continue
        model_side_a = score_a > score_b
        favourite, other = (
            (comparison.trajectory_a, comparison.trajectory_b)
            if model_side_a
            else (comparison.trajectory_b, comparison.trajectory_a)
        )
        found.append(
            {
                "task_id": comparison.task_id,
                "favourite": favourite,
                "other": other,
                "favourite_score": max(score_a, score_b),
                "other_score": min(score_a, score_b),
            }
        )
    found.sort(key=lambda item: (-(item["favourite_score"] - item["other_score"]), item["favourite"].pk))
    return found[:size]


@transaction.atomic
def audit_create(
    *, loop_round: LoopRound, top: list[dict], disagreements: list[dict], votes: int, created_by=None
) -> Campaign | None:
    """The round's blind audit campaign from the candidates (None when there are none)."""
    items = [(AuditItem.Kind.TOP, item) for item in top] + [
        (AuditItem.Kind.DISAGREEMENT, item) for item in disagreements
    ]
    seen, unique = set(), []
    for kind, item in items:  # one comparison per pair of trajectories in a campaign
        key = tuple(sorted((item["favourite"].pk, item["other"].pk)))
        if key not in seen:
            seen.add(key)
            unique.append((kind, item))
    if not unique:
        return None
    name = f"{loop_round} audit"[:200]
    if Campaign.objects.filter(name=name).exists():
        raise ArbiterError(f"A campaign named {name!r} exists already; rename it to let the round open its audit.")
    campaign = Campaign.objects.create(
        name=name, guidelines=AUDIT_GUIDELINES, votes_per_comparison=votes, created_by=created_by
    )
    for kind, item in unique:
        a, b = sorted((item["favourite"], item["other"]), key=lambda t: t.pk)
        comparison = Comparison.objects.create(
            campaign=campaign, task_id=item["task_id"], trajectory_a=a, trajectory_b=b
        )
        AuditItem.objects.create(
            round=loop_round,
            comparison=comparison,
            kind=kind,
            favourite=item["favourite"],
            favourite_score=item["favourite_score"],
            other_score=item["other_score"],
        )
    loop_round.audit_campaign = campaign
    loop_round.save(update_fields=["audit_campaign", "updated_at"])
    return campaign


def audit_result(loop_round: LoopRound) -> dict:
    """Per kind, how often people prefer the reward model's favourite: a win counts 1, a tie
    1/2, with a 95% bootstrap interval over comparisons; also how often they marked both bad,
    and (where the environment has a rubric) how often the favourite is correct by it."""
    result = {}
    for kind in AuditItem.Kind.values:
        items = {
            item.comparison_id: item
            for item in AuditItem.objects.filter(round=loop_round, kind=kind).select_related(
                "comparison__trajectory_a", "comparison__trajectory_b", "favourite"
            )
        }
        votes: dict[int, list[float]] = defaultdict(list)
        both_bad = 0
        for comparison_id, choice, flagged in Judgement.objects.filter(comparison_id__in=items).values_list(
            "comparison_id", "choice", "both_bad"
        ):
            favourite_is_a = items[comparison_id].favourite_id == items[comparison_id].comparison.trajectory_a_id
            direction = choice_direction(choice)
            votes[comparison_id].append(0.5 if direction == "tie" else float((direction == "A") == favourite_is_a))
            both_bad += bool(flagged)
        interval = task_bootstrap(list(votes.values()))
        correct, other_correct = [], []
        for item in items.values():
            comparison = item.comparison
            other = (
                comparison.trajectory_b if item.favourite_id == comparison.trajectory_a_id else comparison.trajectory_a
            )
            if (item.favourite.outcome or {}).get("correct") is not None:
                correct.append(bool(item.favourite.outcome["correct"]))
            if (other.outcome or {}).get("correct") is not None:
                other_correct.append(bool(other.outcome["correct"]))
        flat = sum(len(v) for v in votes.values())
        result[kind] = {
            "comparisons": len(items),
            "judged": len(votes),
            "votes": flat,
            "favourite_preferred": interval["mean"],
            "low": interval["low"],
            "high": interval["high"],
            "both_bad_share": both_bad / flat if flat else None,
            "favourite_correct": sum(correct) / len(correct) if correct else None,
            # the other side's: for top items the start's episode, so the two read side by side
            "other_correct": sum(other_correct) / len(other_correct) if other_correct else None,
        }
    return result
