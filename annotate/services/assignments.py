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

Counting: each comparison carries `votes` (judgements stored) and `slots_taken`
(judgements plus leases the sweep has not yet expired), changed in the same transaction
as the rows they count. A lease whose time ran out keeps its slot until the sweep marks
it expired and gives the slot back; so a late submit before the sweep is simply
accepted, and after it is accepted only if a slot is still free.

Concurrency: the next-assignment query locks one candidate comparison row with
`SELECT ... FOR UPDATE SKIP LOCKED` (PostgreSQL), so annotators pulling at once skip
each other's rows instead of waiting, and takes a slot by updating that row. A
transaction that read the row before the update re-checks `slots_taken < k` on the new
row version before it may lock it, so no comparison is ever over-assigned. SQLite (the
embedded mode) has no row locks but runs one writer at a time, which gives the same
guarantee.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Case, Exists, F, OuterRef, Value, When
from django.utils import timezone

from annotate.judgement_input import SCALE, Verdict, judgement_parse
from annotate.models import Assignment, Campaign, Comparison, Judgement
from annotate.services.campaigns import campaign_may_label, dimensions_of
from webapp.errors import ArbiterError

# Expired leases are swept at most this often per process and campaign, and always
# when a pull finds nothing (so an expired slot is never lost to a waiting annotator).
SWEEP_EVERY_SECONDS = 10.0
_last_sweep: dict[int, float] = {}


@transaction.atomic
def assignments_expire(*, campaign: Campaign) -> int:
    """Mark leases whose time ran out as expired and give their slots back; returns how many."""
    now = timezone.now()
    expired = list(
        Assignment.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(status=Assignment.Status.LEASED, leased_until__lte=now, comparison__campaign=campaign)
        .values_list("id", "comparison_id")
    )
    if not expired:
        return 0
    Assignment.objects.filter(pk__in=[a for a, _ in expired], status=Assignment.Status.LEASED).update(
        status=Assignment.Status.EXPIRED, updated_at=now
    )
    for comparison_id in sorted({c for _, c in expired}):
        n = sum(1 for _, c in expired if c == comparison_id)
        Comparison.objects.filter(pk=comparison_id).update(slots_taken=F("slots_taken") - n)
    return len(expired)


def leases_end_outside_pool(*, campaign: Campaign) -> int:
    """End the live leases of people who may no longer label the campaign (taken out of its pool):
    the slots go back at once, and a late submit of theirs is refused. Returns how many."""
    leases = Assignment.objects.filter(comparison__campaign=campaign, status=Assignment.Status.LEASED)
    ended = [
        a for a in leases.select_related("annotator") if not campaign_may_label(campaign=campaign, user=a.annotator)
    ]
    if not ended:
        return 0
    Assignment.objects.filter(pk__in=[a.pk for a in ended]).update(leased_until=timezone.now() - timedelta(seconds=1))
    return assignments_expire(campaign=campaign)


def _sweep_if_due(campaign: Campaign) -> None:
    now = time.monotonic()
    if now - _last_sweep.get(campaign.id, 0.0) >= SWEEP_EVERY_SECONDS:
        _last_sweep[campaign.id] = now
        assignments_expire(campaign=campaign)


# PostgreSQL: pick, lock and take a slot in one statement (the hot path of labeling).
_TAKE_SLOT_SQL = """
WITH candidate AS (
    SELECT c.id FROM annotate_comparison c
    WHERE c.campaign_id = %(campaign)s AND c.status = 'open' AND c.is_gold = %(gold)s
      {slot_rule}
      AND NOT EXISTS (SELECT 1 FROM annotate_assignment a
                      WHERE a.comparison_id = c.id AND a.annotator_id = %(annotator)s)
    ORDER BY c.priority DESC, c.id
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), taken AS (
    UPDATE annotate_comparison c SET slots_taken = c.slots_taken + 1
    FROM candidate WHERE c.id = candidate.id
    RETURNING c.id
)
INSERT INTO annotate_assignment
    (created_at, updated_at, comparison_id, annotator_id, left_is_a, status, leased_until, shown_at, skip_reason)
SELECT %(now)s, %(now)s, taken.id, %(annotator)s, %(left_is_a)s, 'leased', %(until)s, %(now)s, ''
FROM taken
RETURNING id, comparison_id
"""


def _take_slot(campaign: Campaign, annotator, now, *, gold: bool) -> Assignment | None:
    left_is_a = random.random() < 0.5
    until = now + timedelta(seconds=campaign.lease_seconds)
    if connection.vendor == "postgresql":
        sql = _TAKE_SLOT_SQL.format(slot_rule="" if gold else "AND c.slots_taken < %(k)s")
        with connection.cursor() as cursor:
            cursor.execute(
                sql,
                {
                    "campaign": campaign.id,
                    "gold": gold,
                    "k": campaign.votes_per_comparison,
                    "annotator": annotator.pk,
                    "now": now,
                    "until": until,
                    "left_is_a": left_is_a,
                },
            )
            row = cursor.fetchone()
        if row is None:
            return None
        return Assignment(
            id=row[0],
            comparison_id=row[1],
            annotator=annotator,
            left_is_a=left_is_a,
            status=Assignment.Status.LEASED,
            leased_until=until,
            shown_at=now,
            created_at=now,
            updated_at=now,
        )
    # Other databases (SQLite in the embedded mode run one writer at a time): the ORM.
    seen = Assignment.objects.filter(comparison=OuterRef("pk"), annotator=annotator)
    candidates = Comparison.objects.filter(campaign=campaign, status=Comparison.Status.OPEN, is_gold=gold).filter(
        ~Exists(seen)
    )
    if not gold:
        candidates = candidates.filter(slots_taken__lt=campaign.votes_per_comparison)
    comparison = candidates.order_by("-priority", "id").only("id").first()
    if comparison is None:
        return None
    Comparison.objects.filter(pk=comparison.pk).update(slots_taken=F("slots_taken") + 1)
    return Assignment.objects.create(
        comparison_id=comparison.pk,
        annotator=annotator,
        left_is_a=left_is_a,
        leased_until=until,
        shown_at=now,
    )


def assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """The annotator's live lease in this campaign, or a new one; None when nothing is left.

    Refused (PermissionDenied) for an annotator outside the campaign's pool.
    """
    if not campaign_may_label(campaign=campaign, user=annotator):
        raise PermissionDenied(
            f"Campaign {campaign.name!r} is labelled by its pool of annotators only, "
            "and you are not in it. Ask an admin to add you."
        )
    if campaign.status != Campaign.Status.ACTIVE:
        raise ArbiterError(f"Campaign {campaign.name!r} is {campaign.status}, not active.")
    _sweep_if_due(campaign)
    assignment = _assignment_next(campaign=campaign, annotator=annotator)
    if assignment is None and assignments_expire(campaign=campaign):
        assignment = _assignment_next(campaign=campaign, annotator=annotator)
    return assignment


@transaction.atomic
def _assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    now = timezone.now()
    current = (
        Assignment.objects.filter(
            annotator=annotator,
            status=Assignment.Status.LEASED,
            leased_until__gt=now,
            comparison__campaign=campaign,
        )
        .order_by("created_at")
        .first()
    )
    if current is not None:
        return current
    want_gold = campaign.gold_rate > 0 and random.random() < campaign.gold_rate
    if want_gold and (gold := _take_slot(campaign, annotator, now, gold=True)) is not None:
        return gold
    return _take_slot(campaign, annotator, now, gold=False)


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


def _checked(assignment: Assignment, verdict: Verdict) -> Verdict:
    """The verdict read again with what this comparison asks: the campaign's rating dimensions
    and rationale rule, and the steps on each side (counted only when a step is marked). The
    rules are `judgement_parse`'s, the same the form and the API apply to a body."""
    comparison = assignment.comparison
    campaign = comparison.campaign
    step_counts = None
    if verdict.first_wrong_left is not None or verdict.first_wrong_right is not None:
        size_a, size_b = (
            Comparison.objects.filter(pk=comparison.pk)
            .values_list("trajectory_a__num_steps", "trajectory_b__num_steps")
            .get()
        )
        step_counts = (size_a, size_b) if assignment.left_is_a else (size_b, size_a)
    return judgement_parse(
        verdict.body(),
        dimensions=dimensions_of(campaign),
        rationale_required=campaign.rationale_required,
        step_counts=step_counts,
    )


LEASE_LOST = "Your lease on this comparison expired and it already has all its votes: your judgement was not stored."


def judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool]:
    """Record the verdict. Returns (judgement, created); a repeat submit returns the first.

    A late submit is accepted while its lease still holds a slot (not yet swept) or a
    slot is free; otherwise it is refused and nothing is stored.
    """
    result = _judgement_submit(assignment_id=assignment_id, annotator=annotator, verdict=verdict)
    if result is None:
        raise ArbiterError(LEASE_LOST)
    return result


@transaction.atomic
def _judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool] | None:
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("comparison__campaign")
        .filter(pk=assignment_id, annotator=annotator)
        .first()
    )
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you.")
    if assignment.status == Assignment.Status.SUBMITTED:
        return Judgement.objects.get(assignment=assignment), False
    if assignment.status == Assignment.Status.SKIPPED:
        raise ArbiterError("You skipped this comparison; it cannot be judged now.")
    campaign = assignment.comparison.campaign
    if campaign.status == Campaign.Status.ARCHIVED:
        raise ArbiterError(
            f"Campaign {campaign.name!r} is archived: nothing more is stored in it; your judgement was not stored."
        )
    if not campaign_may_label(campaign=campaign, user=annotator):
        raise PermissionDenied(
            f"You are no longer in the pool of campaign {campaign.name!r}: your judgement was not stored."
        )
    verdict = _checked(assignment, verdict)
    comparison = assignment.comparison
    campaign = comparison.campaign
    now = timezone.now()
    k = campaign.votes_per_comparison
    if assignment.status == Assignment.Status.EXPIRED:
        # The sweep gave this slot back: take a free one again, if there is one.
        took = (
            Comparison.objects.filter(pk=comparison.pk)
            .filter(**({} if comparison.is_gold else {"slots_taken__lt": k}))
            .update(slots_taken=F("slots_taken") + 1)
        )
        if not took:
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
    complete = (
        Comparison.Status.OPEN
        if comparison.is_gold
        else Case(When(votes__gte=k - 1, then=Value(Comparison.Status.COMPLETE)), default=F("status"))
    )
    Comparison.objects.filter(pk=comparison.pk).update(votes=F("votes") + 1, status=complete)
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
    if assignment.status == Assignment.Status.SKIPPED:
        return assignment
    if assignment.status == Assignment.Status.LEASED:
        Comparison.objects.filter(pk=assignment.comparison_id).update(slots_taken=F("slots_taken") - 1)
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
    comparison.save(
        update_fields=["adjudicated_choice", "adjudicated_by", "adjudicated_at", "adjudication_note", "updated_at"]
    )
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
    "Verdict",
    "assignment_next",
    "assignment_skip",
    "comparison_adjudicate",
    "comparison_set_gold",
    "judgement_submit",
]
