"""The assignment engine: who labels which comparison next, and recording their verdict.

Rules:
- a non-gold comparison gets exactly `campaign.votes_per_comparison` (k) judgements from
  different annotators; a slot is taken by a submitted judgement or a live lease;
- an annotator never gets the same comparison twice (a database constraint backs this);
- a lease expires after `campaign.lease_seconds`; its slot can then go to someone else;
  a late submit is accepted only while the comparison still needs the vote;
- gold comparisons (known answer) are mixed in at `campaign.gold_rate`, look like any
  other, and do not count against k;
- submitting twice records one judgement.

Concurrency: the next-assignment query locks candidate comparison rows with
`SELECT ... FOR UPDATE SKIP LOCKED` (PostgreSQL), so annotators pulling at once skip
each other's rows instead of waiting, then re-counts the slots of the locked row with a
fresh statement before taking one, so no comparison is ever over-assigned.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotate.models import Assignment, Campaign, Choice, Comparison, Judgement
from webapp.errors import ArbiterError

CANDIDATES_PER_PULL = 8
SCALE = range(1, 6)


def _live_lease(now) -> Q:
    return Q(status=Assignment.Status.LEASED, leased_until__gt=now)


def _slots_taken(comparison_id: int, now, *, excluding: int | None = None) -> int:
    """Judgements plus live leases of other assignments on one comparison (fresh read)."""
    judged = Judgement.objects.filter(comparison_id=comparison_id)
    leases = Assignment.objects.filter(_live_lease(now), comparison_id=comparison_id)
    if excluding is not None:
        judged = judged.exclude(assignment_id=excluding)
        leases = leases.exclude(pk=excluding)
    return judged.count() + leases.count()


def _count_subquery(qs, field="comparison"):
    return Coalesce(
        Subquery(qs.values(field).annotate(n=Count("*")).values("n")[:1], output_field=IntegerField()),
        Value(0),
    )


def _candidates(campaign: Campaign, annotator, now, *, gold: bool):
    seen = Assignment.objects.filter(comparison=OuterRef("pk"), annotator=annotator)
    qs = Comparison.objects.filter(
        campaign=campaign, status=Comparison.Status.OPEN, is_gold=gold
    ).filter(~Exists(seen))
    if not gold:
        judged = _count_subquery(Judgement.objects.filter(comparison=OuterRef("pk")))
        leased = _count_subquery(Assignment.objects.filter(_live_lease(now), comparison=OuterRef("pk")))
        qs = qs.annotate(taken=judged + leased).filter(taken__lt=campaign.votes_per_comparison)
    qs = qs.order_by("-priority", "id")
    if connection.features.has_select_for_update_skip_locked:
        qs = qs.select_for_update(skip_locked=True, of=("self",))
    return qs


def _lease(campaign: Campaign, comparison: Comparison, annotator, now) -> Assignment:
    return Assignment.objects.create(
        comparison=comparison,
        annotator=annotator,
        left_is_a=random.random() < 0.5,
        leased_until=now + timedelta(seconds=campaign.lease_seconds),
        shown_at=now,
    )


@transaction.atomic
def assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """The annotator's live lease in this campaign, or a new one; None when nothing is left."""
    if campaign.status != Campaign.Status.ACTIVE:
        raise ArbiterError(f"Campaign {campaign.name!r} is {campaign.status}, not active.")
    now = timezone.now()
    current = (
        Assignment.objects.filter(_live_lease(now), annotator=annotator, comparison__campaign=campaign)
        .select_related("comparison")
        .order_by("created_at")
        .first()
    )
    if current is not None:
        return current
    want_gold = campaign.gold_rate > 0 and random.random() < campaign.gold_rate
    for gold in ((True, False) if want_gold else (False,)):
        tried: list[int] = []
        for _ in range(CANDIDATES_PER_PULL):
            comparison = _candidates(campaign, annotator, now, gold=gold).exclude(pk__in=tried).first()
            if comparison is None:
                break
            # The row is locked now: a fresh count sees every lease committed before the lock.
            if gold or _slots_taken(comparison.id, now) < campaign.votes_per_comparison:
                return _lease(campaign, comparison, annotator, now)
            tried.append(comparison.id)
    return None


@dataclass(frozen=True)
class Verdict:
    """A judgement as the annotator gave it, in screen terms (left/right)."""

    choice: int  # 1 left much better .. 3 tie .. 5 right much better
    both_bad: bool = False
    ratings: dict | None = None  # dimension -> {"left": 1..5, "right": 1..5}
    first_wrong_left: int | None = None
    first_wrong_right: int | None = None
    rationale: str = ""


def _to_ab(assignment: Assignment, verdict: Verdict) -> dict:
    """Screen terms to A/B terms through the assignment's side mapping."""
    left_is_a = assignment.left_is_a
    choice = verdict.choice if left_is_a else 6 - verdict.choice
    wrong_a, wrong_b = (
        (verdict.first_wrong_left, verdict.first_wrong_right)
        if left_is_a
        else (verdict.first_wrong_right, verdict.first_wrong_left)
    )
    ratings = {}
    for dim, sides in (verdict.ratings or {}).items():
        a, b = (sides.get("left"), sides.get("right")) if left_is_a else (sides.get("right"), sides.get("left"))
        ratings[dim] = {k: v for k, v in (("A", a), ("B", b)) if v is not None}
    return {"choice": choice, "first_wrong_step_a": wrong_a, "first_wrong_step_b": wrong_b, "ratings": ratings}


def _validate(assignment: Assignment, verdict: Verdict) -> None:
    campaign = assignment.comparison.campaign
    problems = []
    if verdict.choice not in SCALE:
        problems.append(f"choice must be 1-5, got {verdict.choice!r}")
    comparison = assignment.comparison
    left, right = (
        (comparison.trajectory_a, comparison.trajectory_b)
        if assignment.left_is_a
        else (comparison.trajectory_b, comparison.trajectory_a)
    )
    for side, index, trajectory in (("left", verdict.first_wrong_left, left), ("right", verdict.first_wrong_right, right)):
        if index is not None and not (0 <= index < len(trajectory.steps)):
            problems.append(
                f"first wrong step on the {side}: step {index} does not exist "
                f"(that trajectory has steps 0-{len(trajectory.steps) - 1})"
            )
    for dim, sides in (verdict.ratings or {}).items():
        if dim not in campaign.dimensions:
            problems.append(f"unknown rating dimension {dim!r} (this campaign has: {', '.join(campaign.dimensions) or 'none'})")
            continue
        for side, value in sides.items():
            if side not in ("left", "right") or value not in SCALE:
                problems.append(f"rating {dim}.{side} must be left/right with a value 1-5")
    if campaign.rationale_required and not verdict.rationale.strip():
        problems.append("this campaign requires a rationale")
    if len(verdict.rationale) > 20_000:
        problems.append("the rationale is over 20,000 characters")
    if problems:
        raise ArbiterError("The judgement was not stored: " + "; ".join(problems) + ".")


LEASE_LOST = (
    "Your lease on this comparison expired and it already has all its votes; "
    "nothing was stored. The next comparison is ready."
)


def judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool]:
    """Record the verdict. Returns (judgement, created); a repeat submit returns the first.

    A late submit whose slot went to someone else is refused; the assignment is then
    marked expired (that mark is kept, the judgement is not stored).
    """
    result = _judgement_submit(assignment_id=assignment_id, annotator=annotator, verdict=verdict)
    if result is None:
        raise ArbiterError(LEASE_LOST)
    return result


@transaction.atomic
def _judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool] | None:
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("comparison__campaign", "comparison__trajectory_a", "comparison__trajectory_b")
        .filter(pk=assignment_id, annotator=annotator)
        .first()
    )
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you.")
    existing = Judgement.objects.filter(assignment=assignment).first()
    if existing is not None:
        return existing, False
    if assignment.status == Assignment.Status.SKIPPED:
        raise ArbiterError("You skipped this comparison; it cannot be judged now.")
    _validate(assignment, verdict)
    comparison = assignment.comparison
    campaign = comparison.campaign
    now = timezone.now()
    if assignment.leased_until <= now:
        # Serialize with the next-assignment query on this comparison, then count afresh.
        Comparison.objects.select_for_update().filter(pk=comparison.pk).first()
        if not comparison.is_gold and _slots_taken(comparison.id, now, excluding=assignment.id) >= campaign.votes_per_comparison:
            assignment.status = Assignment.Status.EXPIRED
            assignment.save(update_fields=["status", "updated_at"])
            return None
    ab = _to_ab(assignment, verdict)
    started = assignment.shown_at or assignment.created_at
    judgement = Judgement.objects.create(
        comparison=comparison,
        annotator=annotator,
        assignment=assignment,
        both_bad=verdict.both_bad,
        rationale=verdict.rationale,
        seconds=max(0.0, (now - started).total_seconds()),
        synthetic=bool(getattr(annotator, "is_synthetic", False)),
        **ab,
    )
    assignment.status = Assignment.Status.SUBMITTED
    assignment.finished_at = now
    assignment.save(update_fields=["status", "finished_at", "updated_at"])
    if not comparison.is_gold:
        if Judgement.objects.filter(comparison=comparison).count() >= campaign.votes_per_comparison:
            Comparison.objects.filter(pk=comparison.pk).update(status=Comparison.Status.COMPLETE)
    return judgement, True


@transaction.atomic
def assignment_skip(*, assignment_id: int, annotator, reason: str) -> Assignment:
    """Give the comparison back; the annotator will not be offered it again."""
    reason = reason.strip()
    if not reason:
        raise ArbiterError("Say why you skip (for example: unreadable, needs expertise, broken).")
    assignment = Assignment.objects.select_for_update().filter(pk=assignment_id, annotator=annotator).first()
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you.")
    if assignment.status == Assignment.Status.SUBMITTED:
        raise ArbiterError("You already judged this comparison.")
    assignment.status = Assignment.Status.SKIPPED
    assignment.skip_reason = reason[:500]
    assignment.finished_at = timezone.now()
    assignment.save(update_fields=["status", "skip_reason", "finished_at", "updated_at"])
    return assignment


@transaction.atomic
def comparison_adjudicate(*, comparison: Comparison, admin, choice: int, note: str = "") -> Comparison:
    """An admin's ruling on a comparison whose votes disagree."""
    if choice not in SCALE:
        raise ArbiterError("choice must be 1-5.")
    comparison.adjudicated_choice = choice
    comparison.adjudicated_by = admin
    comparison.adjudicated_at = timezone.now()
    comparison.adjudication_note = note[:5000]
    comparison.save(update_fields=["adjudicated_choice", "adjudicated_by", "adjudicated_at", "adjudication_note", "updated_at"])
    return comparison


@transaction.atomic
def comparison_set_gold(*, comparison: Comparison, choice: int | None) -> Comparison:
    """Make a comparison gold with a known answer (A/B terms), or ordinary again (None)."""
    if choice is not None and choice not in SCALE:
        raise ArbiterError("A gold answer is a choice 1-5.")
    comparison.is_gold = choice is not None
    comparison.gold_choice = choice
    comparison.save(update_fields=["is_gold", "gold_choice", "updated_at"])
    return comparison


__all__ = [
    "Choice", "Verdict", "assignment_next", "assignment_skip", "comparison_adjudicate",
    "comparison_set_gold", "judgement_submit",
]
