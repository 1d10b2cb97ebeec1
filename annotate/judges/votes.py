"""Judges' votes in a campaign: storing them, what an annotator may see of them, and
ordering the queue disagreement-first.

A judge's vote is a `JudgeVote`, never a `Judgement`: people's figures (agreement, the
k votes, exports) stay people's unless an admin asks otherwise. When a judge run is told
to count its votes (`count_toward_votes`), a first vote takes one of the comparison's k
slots, in the same transaction and with the same rules as a person's submit: only while
a slot is free, completing the comparison at k. Which judges ran is kept on the run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Case, F, Q, Value, When

from annotate.models import Campaign, Comparison, Judge, JudgeMode, JudgeVote
from annotate.routing import JudgedComparison, disagreement_priority
from annotate.services.labeling_sql import PREFILL_CONFIDENCE
from core.problems import problem
from core.votes import direction
from webapp.errors import ArbiterError

ORDERINGS = ("disagreement_first", "none")


@dataclass(frozen=True)
class VoteIn:
    """One answer of a judge on a comparison, in A/B terms."""

    probe: str
    choice: int
    both_bad: bool = False
    ratings: dict | None = None
    first_wrong_step_a: int | None = None
    first_wrong_step_b: int | None = None
    rationale: str = ""
    probability_a: float | None = None


VOTE_FIELDS = (
    "run",
    "choice",
    "both_bad",
    "ratings",
    "first_wrong_step_a",
    "first_wrong_step_b",
    "rationale",
    "probability_a",
)


def judge_votes_store(
    *, judge: Judge, comparison: Comparison, votes: list[VoteIn], run_id: int | None, count_toward_votes: bool
) -> list[JudgeVote]:
    """Store a judge's answers on one comparison (a repeat replaces the earlier answer of that probe),
    in one statement.

    With `count_toward_votes`, a first vote not counted before takes a free slot of the
    comparison's k (never a gold comparison's, never past k) and completes it at k.
    """
    rows = [
        JudgeVote(
            judge=judge,
            comparison=comparison,
            probe=vote.probe,
            run_id=run_id,
            choice=vote.choice,
            both_bad=vote.both_bad,
            ratings=vote.ratings or {},
            first_wrong_step_a=vote.first_wrong_step_a,
            first_wrong_step_b=vote.first_wrong_step_b,
            rationale=vote.rationale,
            probability_a=vote.probability_a,
        )
        for vote in votes
    ]
    JudgeVote.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["judge", "comparison", "probe"], update_fields=VOTE_FIELDS
    )
    if count_toward_votes:
        for row in rows:
            if row.probe == JudgeVote.Probe.FIRST:
                row.counted = _count(row, comparison)
    return rows


@transaction.atomic
def _count(row: JudgeVote, comparison: Comparison) -> bool:
    """Count a first vote toward k once: it takes a free slot, or stays uncounted (False)."""
    first = JudgeVote.objects.filter(judge_id=row.judge_id, comparison=comparison, probe=JudgeVote.Probe.FIRST)
    if not first.filter(counted=False).update(counted=True):
        return False  # counted before: it holds its slot already
    if _take_slot(comparison):
        return True
    first.update(counted=False)
    return False


def _take_slot(comparison: Comparison) -> bool:
    """A slot of the k for a judge's vote, as a person's submit takes one (assignments.py)."""
    if comparison.is_gold:
        return False
    k = comparison.campaign.votes_per_comparison
    took = Comparison.objects.filter(pk=comparison.pk, status=Comparison.Status.OPEN, slots_taken__lt=k).update(
        slots_taken=F("slots_taken") + 1,
        votes=F("votes") + 1,
        status=Case(When(votes__gte=k - 1, then=Value(Comparison.Status.COMPLETE)), default=F("status")),
    )
    return bool(took)


# Below PREFILL_CONFIDENCE a judge's verdict is not filled in for people: a reward model at
# P(A) = 0.51 is a coin flip, and a prefilled coin flip anchors the person's verdict. A judge
# that gives no probability (a chat judge) is filled in as it votes. One rule, three readers:
# the workbench, the API's `judge_suggestion` and what a judgement records as shown (the ORM
# paths use `prefill_sure_q`, the labeling cycle's SQL labeling_sql.PREFILL_SURE_SQL; the
# constant lives there because that module does not import Django).


def judge_vote_sure(probability_a: float | None) -> bool:
    """Whether a vote is sure enough to be filled in for people."""
    return probability_a is None or max(probability_a, 1.0 - probability_a) >= PREFILL_CONFIDENCE


def prefill_sure_q(prefix: str = "") -> Q:
    """`judge_vote_sure` as a filter on JudgeVote rows (`prefix`: the path to them)."""
    field = f"{prefix}probability_a"
    return (
        Q(**{f"{field}__isnull": True})
        | Q(**{f"{field}__gte": PREFILL_CONFIDENCE})
        | Q(**{f"{field}__lte": 1.0 - PREFILL_CONFIDENCE})
    )


def judge_vote_shown(*, campaign: Campaign, comparison_id: int) -> JudgeVote | None:
    """The vote the campaign's judge mode shows on this comparison (None in blind mode)."""
    if campaign.judge_mode == JudgeMode.BLIND or campaign.shown_judge_id is None:
        return None
    return JudgeVote.objects.filter(
        judge_id=campaign.shown_judge_id, comparison_id=comparison_id, probe=JudgeVote.Probe.FIRST
    ).first()


def judge_vote_after_submit(*, judgement) -> dict | None:
    """The judge's vote an annotator sees once they have submitted (judge modes after_submit and
    prefilled), in A/B terms like the judgement itself; None in blind mode or when it has not voted."""
    campaign = judgement.comparison.campaign
    if campaign.judge_mode == JudgeMode.BLIND or campaign.shown_judge_id is None:
        return None
    vote = (
        JudgeVote.objects.filter(
            judge_id=campaign.shown_judge_id, comparison_id=judgement.comparison_id, probe=JudgeVote.Probe.FIRST
        )
        .select_related("judge")
        .first()
    )
    if vote is None:
        return None
    return {
        "judge": vote.judge.name,
        "choice": vote.choice,
        "both_bad": vote.both_bad,
        "rationale": vote.rationale,
        "probability_a": vote.probability_a,
    }


def judged_comparisons(*, comparison_ids, judge_ids=None) -> dict[int, JudgedComparison]:
    """What the judges said of each comparison, as the routing reads it."""
    votes = JudgeVote.objects.filter(comparison_id__in=comparison_ids)
    if judge_ids:
        votes = votes.filter(judge_id__in=judge_ids)
    by_comparison: dict[int, dict[int, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))
    for comparison_id, judge_id, probe, choice, probability in votes.values_list(
        "comparison_id", "judge_id", "probe", "choice", "probability_a"
    ).iterator(chunk_size=5000):
        by_comparison[comparison_id][judge_id][probe] = (choice, probability)
    judged = {}
    for comparison_id, judges in by_comparison.items():
        directions, probabilities, unstable = [], [], False
        for probes in judges.values():
            first = probes.get(JudgeVote.Probe.FIRST)
            if first is None:
                continue
            directions.append(direction(first[0]))
            if first[1] is not None:
                probabilities.append(first[1])
            unstable |= any(
                direction(other[0]) != direction(first[0])
                for probe, other in probes.items()
                if probe != JudgeVote.Probe.FIRST
            )
        judged[comparison_id] = JudgedComparison(directions, probabilities, unstable)
    return judged


@transaction.atomic
def campaign_order(*, campaign: Campaign, ordering: str, judge_ids: list[int] | None = None) -> int:
    """Set the queue priority of the campaign's open comparisons.

    `disagreement_first`: comparisons the judges dispute, or the reward model is unsure of,
    are offered to people first (annotate/routing.py says how each is scored). `none`:
    back to the plain order (priority 0). Gold comparisons keep theirs. Returns the number
    of comparisons whose priority was set.
    """
    if ordering not in ORDERINGS:
        raise ArbiterError(
            f"ordering: one of {', '.join(ORDERINGS)}; got {str(ordering)[:40]!r}.",
            details=[problem(f"one of {', '.join(ORDERINGS)}.", field="ordering")],
        )
    open_rows = Comparison.objects.filter(campaign=campaign, is_gold=False, status=Comparison.Status.OPEN)
    if ordering == "none":
        return open_rows.update(priority=0.0)
    if not JudgeVote.objects.filter(comparison__campaign=campaign).exists():
        raise ArbiterError(
            f"No judge has voted in {campaign.name} yet: run a judge on it first (docs/judges.md).",
            details=[problem("no judge votes to order by.", field="ordering")],
        )
    ids = list(open_rows.values_list("id", flat=True))
    updates = []
    for start in range(0, len(ids), 5000):
        chunk = ids[start : start + 5000]
        judged = judged_comparisons(comparison_ids=chunk, judge_ids=judge_ids)
        updates.extend(Comparison(pk=pk, priority=disagreement_priority(judged.get(pk))) for pk in chunk)
    Comparison.objects.bulk_update(updates, ["priority"], batch_size=1000)
    return len(updates)
