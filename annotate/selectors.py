"""Reads of the annotation domain."""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, QuerySet

from annotate.agreement import pairwise_agreement
from annotate.campaign_access import campaigns_labelable_by
from annotate.judges.votes import prefill_sure_q
from annotate.models import (
    Assignment,
    Campaign,
    Comparison,
    ImportBatch,
    Judgement,
    JudgeVote,
    Task,
    Trajectory,
    choice_direction,
)
from annotate.services import labeling_sql
from webapp.models import User
from webapp.roles import Role, user_has_role


def import_batches_recent(*, limit: int = 20) -> QuerySet[ImportBatch]:
    return ImportBatch.objects.select_related("campaign", "created_by").order_by("-created_at")[:limit]


def domain_counts() -> dict[str, int]:
    """Headline numbers for the home page."""
    return {
        "tasks": Task.objects.count(),
        "trajectories": Trajectory.objects.count(),
        "comparisons": Comparison.objects.count(),
        "judgements": Judgement.objects.count(),
    }


def campaigns_for_labeling(*, user) -> list[Campaign]:
    """Active campaigns the user may label (all active ones for a researcher, who reads
    them), each with its progress (`campaign_progress`) for this user."""
    return campaigns_with_progress(user=user, statuses=[Campaign.Status.ACTIVE])


def campaigns_visible(*, user, statuses: list[str]) -> QuerySet[Campaign]:
    """Campaigns in these statuses that the user may see: an annotator the ones they may
    label; researchers and admins every one."""
    rows = Campaign.objects.filter(status__in=statuses)
    if not user_has_role(user, Role.RESEARCHER, Role.ADMIN):
        rows = rows.filter(pk__in=campaigns_labelable_by(user).values("pk"))
    return rows


def campaigns_with_progress(*, user, statuses: list[str], ids: list[int] | None = None) -> list[Campaign]:
    """Campaigns in these statuses (and of these ids) that the user may see, by name, each with
    its progress (`campaigns_progress_set`)."""
    rows = campaigns_visible(user=user, statuses=statuses)
    if ids is not None:
        rows = rows.filter(pk__in=ids)
    return campaigns_progress_set(campaigns=list(rows.order_by("name")), user=user)


def campaigns_progress_set(*, campaigns: list[Campaign], user) -> list[Campaign]:
    """The campaigns, each given its `progress` for the user and `may_label`."""
    labelable = set(campaigns_labelable_by(user).filter(pk__in=[c.pk for c in campaigns]).values_list("pk", flat=True))
    progress = campaign_progress(campaigns=campaigns, user=user)
    for campaign in campaigns:
        campaign.progress = progress[campaign.pk]
        if campaign.pk not in labelable or campaign.status != Campaign.Status.ACTIVE:
            campaign.progress["left_for_you"] = 0
        campaign.may_label = campaign.pk in labelable
    return campaigns


def campaign_activity(*, campaign: Campaign, days: int = 14, now=None) -> dict:
    """Who labels a campaign and when: per annotator (judgements, the last day's, skips,
    leases held now, gold accuracy, last judgement) and judgements per day over `days`."""
    from datetime import timedelta

    from django.db.models import Max
    from django.db.models.functions import TruncDate
    from django.utils import timezone

    now = now or timezone.now()
    judgements = Judgement.objects.filter(comparison__campaign=campaign)
    per = {
        row["annotator"]: row for row in judgements.values("annotator").annotate(n=Count("id"), last=Max("created_at"))
    }
    day = dict(
        judgements.filter(created_at__gte=now - timedelta(days=1)).values_list("annotator").annotate(n=Count("id"))
    )
    assignments = Assignment.objects.filter(comparison__campaign=campaign)
    skips = dict(assignments.filter(status=Assignment.Status.SKIPPED).values_list("annotator").annotate(n=Count("id")))
    leases = dict(
        assignments.filter(status=Assignment.Status.LEASED, leased_until__gt=now)
        .values_list("annotator")
        .annotate(n=Count("id"))
    )
    gold: dict[int, list[bool]] = {}
    for annotator, choice, gold_choice in judgements.filter(comparison__is_gold=True).values_list(
        "annotator", "choice", "comparison__gold_choice"
    ):
        gold.setdefault(annotator, []).append(choice_direction(choice) == choice_direction(gold_choice))
    pool = set(campaign.pool.values_list("pk", flat=True))
    ids = set(per) | set(skips) | set(leases) | pool
    users = {u.pk: u for u in User.objects.filter(pk__in=ids)}
    annotators = sorted(
        (
            {
                "user": users[i],
                "judgements": per.get(i, {}).get("n", 0),
                "last_day": day.get(i, 0),
                "skips": skips.get(i, 0),
                "open_leases": leases.get(i, 0),
                "last": per.get(i, {}).get("last"),
                "in_pool": i in pool,
                "gold_accuracy": sum(gold[i]) / len(gold[i]) if gold.get(i) else None,
            }
            for i in ids
            if i in users
        ),
        key=lambda a: (-a["judgements"], a["user"].username),
    )
    start = (now - timedelta(days=days - 1)).date()
    counts = dict(
        judgements.filter(created_at__date__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values_list("day")
        .annotate(n=Count("id"))
    )
    daily = [(start + timedelta(days=d), counts.get(start + timedelta(days=d), 0)) for d in range(days)]
    return {"annotators": annotators, "daily": daily}


def campaign_progress(*, campaigns: list[Campaign], user, now=None) -> dict[int, dict]:
    """Per campaign, in a fixed number of queries however many campaigns:

    - `done` of `needed` judgements (non-gold comparisons x votes per comparison) and the share;
    - `last_day`: judgements in the last 24 hours, `per_hour` over them, and `eta_hours` to
      finish at that pace (0 when finished; None with no pace yet or no comparisons);
    - `open_leases`: assignments leased now; `left_for_you`: comparisons this user may still
      be given (open, a slot free, never assigned to them) plus the one they hold now, and
      `mine`: their judgements;
    - `gold_accuracy`: the share of gold judgements on the gold answer's side (None without any);
    - `agreement`: the share of pairs of votes on one comparison that pick the same side (A,
      B or tie), over ordinary comparisons with two votes or more (None before there are any).
    """
    from datetime import timedelta

    from django.db.models import F
    from django.utils import timezone

    now = now or timezone.now()
    ids = [c.pk for c in campaigns]
    comparisons = dict(
        Comparison.objects.filter(campaign_id__in=ids, is_gold=False).values_list("campaign_id").annotate(n=Count("id"))
    )
    judgements = Judgement.objects.filter(comparison__campaign_id__in=ids)
    done = dict(
        judgements.filter(comparison__is_gold=False).values_list("comparison__campaign_id").annotate(n=Count("id"))
    )
    last_day = dict(
        judgements.filter(comparison__is_gold=False, created_at__gte=now - timedelta(days=1))
        .values_list("comparison__campaign_id")
        .annotate(n=Count("id"))
    )
    mine = dict(judgements.filter(annotator=user).values_list("comparison__campaign_id").annotate(n=Count("id")))
    live = Assignment.objects.filter(
        comparison__campaign_id__in=ids, status=Assignment.Status.LEASED, leased_until__gt=now
    )
    leases = dict(live.values_list("comparison__campaign_id").annotate(n=Count("id")))
    my_leases = dict(live.filter(annotator=user).values_list("comparison__campaign_id").annotate(n=Count("id")))
    left = dict(
        Comparison.objects.filter(
            campaign_id__in=ids,
            is_gold=False,
            status=Comparison.Status.OPEN,
            slots_taken__lt=F("campaign__votes_per_comparison"),
        )
        .exclude(assignments__annotator=user)
        .values_list("campaign_id")
        .annotate(n=Count("id"))
    )
    gold: dict[int, list[bool]] = {}
    for campaign_id, choice, gold_choice in judgements.filter(comparison__is_gold=True).values_list(
        "comparison__campaign_id", "choice", "comparison__gold_choice"
    ):
        gold.setdefault(campaign_id, []).append(choice_direction(choice) == choice_direction(gold_choice))
    units: dict[int, dict[int, list[int]]] = {}
    for campaign_id, comparison_id, choice in (
        judgements.filter(comparison__is_gold=False, comparison__votes__gte=2)
        .values_list("comparison__campaign_id", "comparison_id", "choice")
        .iterator(chunk_size=10_000)
    ):
        units.setdefault(campaign_id, {}).setdefault(comparison_id, []).append(choice)
    found = {}
    for campaign in campaigns:
        needed = comparisons.get(campaign.pk, 0) * campaign.votes_per_comparison
        made = min(done.get(campaign.pk, 0), needed)
        per_hour = last_day.get(campaign.pk, 0) / 24
        remaining = needed - made
        found[campaign.pk] = {
            "needed": needed,
            "done": made,
            "share": made / needed if needed else None,
            "last_day": last_day.get(campaign.pk, 0),
            "per_hour": per_hour,
            "eta_hours": None
            if not needed
            else (0.0 if not remaining else (remaining / per_hour if per_hour else None)),
            "open_leases": leases.get(campaign.pk, 0),
            "left_for_you": left.get(campaign.pk, 0) + my_leases.get(campaign.pk, 0),
            "mine": mine.get(campaign.pk, 0),
            "gold_accuracy": (sum(gold[campaign.pk]) / len(gold[campaign.pk])) if gold.get(campaign.pk) else None,
            "agreement": pairwise_agreement(list(units.get(campaign.pk, {}).values())).with_ties,
        }
    return found


def campaign_notices(*, campaigns: list[Campaign], now=None) -> list[dict]:
    """What an admin should hear about active campaigns (each with its `progress`):
    finished (every needed judgement made) or stalled (work remains and no judgement for a
    day, counted from the campaign's start when it has none)."""
    from datetime import timedelta

    from django.db.models import Max
    from django.utils import timezone

    now = now or timezone.now()
    last = dict(
        Judgement.objects.filter(comparison__campaign__in=campaigns)
        .values_list("comparison__campaign_id")
        .annotate(at=Max("created_at"))
    )
    notices = []
    for campaign in campaigns:
        progress = campaign.progress
        if progress["needed"] and progress["done"] >= progress["needed"]:
            notices.append(
                {
                    "campaign": campaign,
                    "kind": "finished",
                    "text": f"{campaign.name} has finished: all {progress['needed']} judgements are in.",
                }
            )
        elif progress["needed"] and (last.get(campaign.pk) or campaign.created_at) < now - timedelta(days=1):
            notices.append(
                {
                    "campaign": campaign,
                    "kind": "stalled",
                    "text": f"{campaign.name} has stalled: no judgement for over a day, "
                    f"{progress['needed'] - progress['done']} still needed.",
                }
            )
    return notices


_SCREEN_FIELDS = (
    "id",
    "left_is_a",
    "leased_until",
    "comparison__campaign_id",
    "comparison__task__prompt",
    "comparison__trajectory_a__steps",
    "comparison__trajectory_a__answer",
    "comparison__trajectory_b__steps",
    "comparison__trajectory_b__answer",
    "comparison__campaign__dimensions",
    "comparison__campaign__rationale_required",
    "comparison__campaign__judge_mode",
    "judge_choice",  # the campaign's shown judge's vote on the comparison (A/B terms), if any
)


def _screen_row(assignment_id: int) -> dict:
    """One query: on PostgreSQL the labeling cycle's own statement (labeling_sql.SCREEN), else the ORM."""
    if connection.vendor != "postgresql":
        from django.db.models import OuterRef, Subquery

        shown = (
            JudgeVote.objects.filter(
                comparison=OuterRef("comparison"), judge=OuterRef("comparison__campaign__shown_judge"), probe="first"
            )
            .filter(prefill_sure_q())
            .values("choice")[:1]
        )
        rows = Assignment.objects.filter(pk=assignment_id).annotate(judge_choice=Subquery(shown))
        return rows.values(*_SCREEN_FIELDS).get()
    with connection.cursor() as cursor:
        cursor.execute(
            labeling_sql.SCREEN, {"assignment": assignment_id, "prefill_sure": labeling_sql.PREFILL_CONFIDENCE}
        )
        values = cursor.fetchone()
    if values is None:
        raise Assignment.DoesNotExist(f"No assignment {assignment_id}.")
    row = dict(zip(_SCREEN_FIELDS, values))
    for key in (
        "comparison__trajectory_a__steps",
        "comparison__trajectory_b__steps",
        "comparison__campaign__dimensions",
    ):
        row[key] = labeling_sql.json_column(row[key])
    return row


def assignment_screen_payload(*, assignment_id: int) -> dict:
    """An assignment in screen terms (left/right), never naming the policies: one query."""
    row = _screen_row(assignment_id)
    a = {"steps": row["comparison__trajectory_a__steps"], "answer": row["comparison__trajectory_a__answer"]}
    b = {"steps": row["comparison__trajectory_b__steps"], "answer": row["comparison__trajectory_b__answer"]}
    left, right = (a, b) if row["left_is_a"] else (b, a)
    dimensions = [
        {"name": d, "scale": 5, "description": ""} if isinstance(d, str) else d
        for d in row["comparison__campaign__dimensions"] or []
    ]
    return {
        "id": row["id"],
        "campaign": row["comparison__campaign_id"],
        "leased_until": row["leased_until"],
        "prompt": row["comparison__task__prompt"],
        "left": left,
        "right": right,
        "dimensions": [d["name"] for d in dimensions],
        "rating_dimensions": dimensions,
        "rationale_required": row["comparison__campaign__rationale_required"],
        "judge_suggestion": _suggestion(row),
    }


def _suggestion(row: dict) -> int | None:
    """The judge's verdict in screen terms, where the campaign fills it in (prefilled mode)."""
    choice = row["judge_choice"]
    if row["comparison__campaign__judge_mode"] != "prefilled" or choice is None:
        return None
    return choice if row["left_is_a"] else 6 - choice
