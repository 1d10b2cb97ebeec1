"""The assignment engine: who labels which comparison next, and recording their verdict.

Rules:
- a non-gold comparison gets exactly `campaign.votes_per_comparison` (k) judgements from
  different annotators; a slot is taken by a submitted judgement or a live lease;
- an annotator never gets the same comparison twice (a database constraint backs this);
- a lease expires after `campaign.lease_seconds`; its slot can then go to someone else;
  a late submit is accepted only while the comparison still needs the vote;
- gold comparisons (known answer) are mixed in at `campaign.gold_rate`, look like any
  other, and do not count against k;
- submitting twice records one judgement;
- a judgement in progress (a draft, annotate/services/drafts.py) lives as long as its lease:
  submitting, skipping or the lease's expiry removes it.

Counting: each comparison carries `votes` (judgements stored) and `slots_taken`
(judgements plus leases the sweep has not yet expired), changed in the same transaction
as the rows they count. A lease whose time ran out keeps its slot until the sweep marks
it expired and gives the slot back; so a late submit before the sweep is simply
accepted, and after it is accepted only if a slot is still free.

Concurrency: the next-assignment query locks one candidate comparison row with
`SELECT ... FOR UPDATE SKIP LOCKED` (PostgreSQL), so annotators pulling at once skip
each other's rows instead of waiting, and takes a slot by updating that row (when that finds
nothing while a candidate is locked this instant, the pull tries again a little later). A
transaction that read the row before the update re-checks `slots_taken < k` on the new
row version before it may lock it, so no comparison is ever over-assigned. A submit on a
live lease writes with one statement that finishes the lease only if it is still `leased`
(a compare-and-set): of two submits, or a submit and the sweep, one wins and the other
takes the locked path, which sees what happened. On PostgreSQL these are the labeling
cycle's plain statements (labeling_sql.py), each atomic on its own. SQLite (the embedded
mode) has no row locks but runs one writer at a time, which gives the same guarantee.
"""

from __future__ import annotations

import json
import random
import time
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Case, Exists, F, OuterRef, Value, When
from django.utils import timezone

from annotate.campaign_access import campaign_may_label, dimensions_of
from annotate.judgement_input import SCALE, Verdict, judgement_parse, verdict_in_ab_terms
from annotate.judges.votes import prefill_sure_q
from annotate.models import Assignment, Campaign, Comparison, Judgement, JudgementDraft, JudgeMode, JudgeVote
from annotate.services import labeling_sql
from webapp.db import instance_from_values
from webapp.errors import ArbiterError

# Expired leases are swept at most this often per process and campaign, and always
# when a pull finds nothing (so an expired slot is never lost to a waiting annotator).
SWEEP_EVERY_SECONDS = 10.0
_last_sweep: dict[int, float] = {}
NOT_YOURS = "That comparison is not assigned to you."


def drafts_discard(assignment_ids: list[int]) -> None:
    """The drafts of assignments that were submitted, skipped or expired: nothing to come back to."""
    JudgementDraft.objects.filter(assignment_id__in=assignment_ids).delete()


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
    drafts_discard([a for a, _ in expired])
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


# How long a pull waits, in all, for a candidate row that other statements hold locked (each
# holds it for one statement) before it says nothing is left: the waits between its tries.
LOCKED_CANDIDATE_WAITS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)


def _lease_or_take(campaign: Campaign, annotator, now, *, gold: bool) -> Assignment | None:
    """PostgreSQL: the annotator's live lease, else a new one, in one statement (labeling_sql).

    SKIP LOCKED passes by a comparison whose row another pull or a submit holds this instant,
    so finding nothing is checked: while such a candidate exists, the pull tries again (the
    annotators who pulled at once then get exactly k votes on every comparison, none told
    "nothing left" while a slot was free)."""
    params = {
        "campaign": campaign.id,
        "gold": gold,
        "k": campaign.votes_per_comparison,
        "annotator": annotator.pk,
        "now": now,
        "until": now + timedelta(seconds=campaign.lease_seconds),
        "left_is_a": random.random() < 0.5,
    }
    with connection.cursor() as cursor:
        for wait in (*LOCKED_CANDIDATE_WAITS, None):
            cursor.execute(labeling_sql.LEASE_OR_TAKE_GOLD if gold else labeling_sql.LEASE_OR_TAKE, params)
            row = cursor.fetchone()
            if row is not None or wait is None:
                break
            cursor.execute(labeling_sql.CANDIDATE_LOCKED_GOLD if gold else labeling_sql.CANDIDATE_LOCKED, params)
            if not cursor.fetchone()[0]:
                break
            time.sleep(wait)
    if row is None:
        return None
    assignment = instance_from_values(
        Assignment, {**dict(zip(labeling_sql.LEASE_FIELDS, row)), "status": Assignment.Status.LEASED}
    )
    assignment.annotator = annotator
    return assignment


def _take_slot(campaign: Campaign, annotator, now, *, gold: bool) -> Assignment | None:
    """Other databases (SQLite in the embedded mode runs one writer at a time): the ORM."""
    left_is_a = random.random() < 0.5
    until = now + timedelta(seconds=campaign.lease_seconds)
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


def campaign_for_labeling(campaign_id: int) -> Campaign | None:
    """The campaign with what `assignment_next` reads (its other fields load if touched);
    None when there is no such campaign. One plain statement on PostgreSQL."""
    if connection.vendor != "postgresql":
        return Campaign.objects.filter(pk=campaign_id).first()
    with connection.cursor() as cursor:
        cursor.execute(labeling_sql.CAMPAIGN, {"campaign": campaign_id})
        row = cursor.fetchone()
    return None if row is None else instance_from_values(Campaign, dict(zip(labeling_sql.CAMPAIGN_FIELDS, row)))


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


def _assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    want_gold = campaign.gold_rate > 0 and random.random() < campaign.gold_rate
    if connection.vendor == "postgresql":
        now = timezone.now()
        if want_gold and (gold := _lease_or_take(campaign, annotator, now, gold=True)) is not None:
            return gold
        return _lease_or_take(campaign, annotator, now, gold=False)
    return _assignment_next_orm(campaign=campaign, annotator=annotator, want_gold=want_gold)


@transaction.atomic
def _assignment_next_orm(*, campaign: Campaign, annotator, want_gold: bool) -> Assignment | None:
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
    if want_gold and (gold := _take_slot(campaign, annotator, now, gold=True)) is not None:
        return gold
    return _take_slot(campaign, annotator, now, gold=False)


def store_allowed(assignment: Assignment, what: str, *, closed_too: bool = False) -> None:
    """Refuse to store a person's work on an assignment whose campaign is archived (or, with
    `closed_too`, closed) or whose pool no longer holds them: one rule for judgements and
    corrections."""
    campaign = assignment.comparison.campaign
    stopped = (Campaign.Status.ARCHIVED, Campaign.Status.CLOSED) if closed_too else (Campaign.Status.ARCHIVED,)
    if campaign.status in stopped:
        raise ArbiterError(
            f"Campaign {campaign.name!r} is {campaign.status}: nothing more is stored in it; your {what} was not stored."
        )
    if not campaign_may_label(campaign=campaign, user=assignment.annotator):
        raise PermissionDenied(
            f"You are no longer in the pool of campaign {campaign.name!r}: your {what} was not stored."
        )


def _to_ab(assignment: Assignment, verdict: Verdict) -> dict:
    """Screen terms to A/B terms through the assignment's side mapping."""
    return verdict_in_ab_terms(verdict, left_is_a=assignment.left_is_a)


def verdict_checked(assignment: Assignment, verdict: Verdict, *, sizes: tuple[int, int] | None = None) -> Verdict:
    """The verdict read again with what this comparison asks: the campaign's rating dimensions
    and rationale rule, and the steps on each side (A and B: `sizes` when the caller has
    them, else read when a step is marked). The rules are `judgement_parse`'s, the same the
    form and the API apply to a body. Refused outright when the campaign is archived or the
    annotator has left its pool."""
    comparison = assignment.comparison
    campaign = comparison.campaign
    store_allowed(assignment, "judgement")
    step_counts = None
    if verdict.first_wrong_left is not None or verdict.first_wrong_right is not None:
        if sizes is None:
            sizes = (
                Comparison.objects.filter(pk=comparison.pk)
                .values_list("trajectory_a__num_steps", "trajectory_b__num_steps")
                .get()
            )
        step_counts = sizes if assignment.left_is_a else sizes[::-1]
    return judgement_parse(
        verdict.body(),
        dimensions=dimensions_of(campaign),
        rationale_required=campaign.rationale_required,
        step_counts=step_counts,
    )


def _judgement_fields(assignment: Assignment, verdict: Verdict, now) -> dict:
    """The judgement's columns for a checked verdict on this assignment."""
    started = assignment.shown_at or assignment.created_at
    return {
        "both_bad": verdict.both_bad,
        "rationale": verdict.rationale,
        "seconds": max(0.0, (now - started).total_seconds()),
        "synthetic": bool(getattr(assignment.annotator, "is_synthetic", False)),
        **_to_ab(assignment, verdict),
    }


def _judge_suggestion(comparison: Comparison, campaign: Campaign) -> int | None:
    """What a prefilled form showed (A/B terms): the campaign's judge's vote on the comparison.
    The PostgreSQL path reads the same in SUBMIT_WRITE."""
    if campaign.judge_mode != JudgeMode.PREFILLED or campaign.shown_judge_id is None:
        return None
    return (
        JudgeVote.objects.filter(comparison=comparison, judge_id=campaign.shown_judge_id, probe=JudgeVote.Probe.FIRST)
        .filter(prefill_sure_q())
        .values_list("choice", flat=True)
        .first()
    )


LEASE_LOST = "Your lease on this comparison expired and it already has all its votes: your judgement was not stored."


def judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool]:
    """Record the verdict. Returns (judgement, created); a repeat submit returns the first.

    A late submit is accepted while its lease still holds a slot (not yet swept) or a
    slot is free; otherwise it is refused and nothing is stored.
    """
    result = None
    if connection.vendor == "postgresql":
        result = _judgement_submit_live(assignment_id=assignment_id, annotator=annotator, verdict=verdict)
    if result is None:
        result = _judgement_submit(assignment_id=assignment_id, annotator=annotator, verdict=verdict)
    if result is None:
        raise ArbiterError(LEASE_LOST)
    return result


def _judgement_submit_live(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool] | None:
    """PostgreSQL, a live lease (the common case): two statements (labeling_sql), no lock held
    between them. None when the lease is not live, or stopped being live between the read and
    the write: then the locked path below decides, with the whole story."""
    with connection.cursor() as cursor:
        cursor.execute(labeling_sql.SUBMIT_READ, {"assignment": assignment_id, "annotator": annotator.pk})
        row = cursor.fetchone()
    if row is None:
        return None
    read = labeling_sql.SubmitRead(*row)
    if read.status != Assignment.Status.LEASED:
        return None
    campaign = instance_from_values(
        Campaign,
        {
            "id": read.campaign_id,
            "name": read.name,
            "status": read.campaign_status,
            "pool_only": read.pool_only,
            "votes_per_comparison": read.k,
            "dimensions": labeling_sql.json_column(read.dimensions),
            "rationale_required": read.rationale_required,
            "judge_mode": read.judge_mode,
            "shown_judge_id": read.shown_judge_id,
        },
    )
    comparison_id = read.comparison_id
    comparison = instance_from_values(
        Comparison, {"id": comparison_id, "campaign_id": read.campaign_id, "is_gold": read.is_gold}
    )
    comparison.campaign = campaign
    assignment = instance_from_values(
        Assignment,
        {
            "id": assignment_id,
            "comparison_id": comparison_id,
            "annotator_id": annotator.pk,
            "left_is_a": read.left_is_a,
            "status": read.status,
            "shown_at": read.shown_at,
            "created_at": read.created_at,
        },
    )
    assignment.comparison, assignment.annotator = comparison, annotator
    verdict = verdict_checked(assignment, verdict, sizes=(read.size_a, read.size_b))
    now = timezone.now()
    fields = _judgement_fields(assignment, verdict, now)
    with connection.cursor() as cursor:
        cursor.execute(
            labeling_sql.SUBMIT_WRITE,
            {
                **fields,
                "ratings": json.dumps(fields["ratings"]),
                "assignment": assignment_id,
                "annotator": annotator.pk,
                "k": read.k,
                "now": now,
                "prefill_sure": labeling_sql.PREFILL_CONFIDENCE,
            },
        )
        written = cursor.fetchone()
    if written is None:
        return None
    judgement = instance_from_values(
        Judgement,
        {
            "id": written[0],
            "created_at": now,
            "updated_at": now,
            "comparison_id": comparison_id,
            "annotator_id": annotator.pk,
            "assignment_id": assignment_id,
            **fields,
        },
    )
    judgement.annotator, judgement.comparison = annotator, comparison
    return judgement, True


@transaction.atomic
def _judgement_submit(*, assignment_id: int, annotator, verdict: Verdict) -> tuple[Judgement, bool] | None:
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("comparison__campaign")
        .filter(pk=assignment_id, annotator=annotator)
        .first()
    )
    if assignment is None:
        raise ArbiterError(NOT_YOURS)
    if assignment.status == Assignment.Status.SUBMITTED:
        return Judgement.objects.get(assignment=assignment), False
    if assignment.status == Assignment.Status.SKIPPED:
        raise ArbiterError("You skipped this comparison; it cannot be judged now.")
    assignment.annotator = annotator
    verdict = verdict_checked(assignment, verdict)
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
    judgement = Judgement.objects.create(
        comparison=comparison,
        annotator=annotator,
        assignment=assignment,
        judge_suggestion=_judge_suggestion(comparison, campaign),
        **_judgement_fields(assignment, verdict, now),
    )
    assignment.status = Assignment.Status.SUBMITTED
    assignment.finished_at = now
    assignment.save(update_fields=["status", "finished_at", "updated_at"])
    drafts_discard([assignment.pk])  # the live path drops it in SUBMIT_WRITE
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
        raise ArbiterError(NOT_YOURS)
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
    drafts_discard([assignment.pk])
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
    "campaign_for_labeling",
    "comparison_adjudicate",
    "comparison_set_gold",
    "judgement_submit",
    "verdict_checked",
]
