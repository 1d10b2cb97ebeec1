"""Reads of the annotation domain."""
from __future__ import annotations

from django.db.models import Count, QuerySet

from annotate.models import Campaign, ImportBatch


def import_batches_recent(*, limit: int = 20) -> QuerySet[ImportBatch]:
    return ImportBatch.objects.select_related("campaign", "created_by").order_by("-created_at")[:limit]


def campaigns_with_counts() -> QuerySet[Campaign]:
    return Campaign.objects.annotate(
        n_comparisons=Count("comparisons", distinct=True),
    ).order_by("-created_at")


def domain_counts() -> dict[str, int]:
    """Headline numbers for the home page."""
    from annotate.models import Comparison, Judgement, Task, Trajectory

    return {
        "tasks": Task.objects.count(),
        "trajectories": Trajectory.objects.count(),
        "comparisons": Comparison.objects.count(),
        "judgements": Judgement.objects.count(),
    }


def campaigns_for_labeling(*, user) -> QuerySet[Campaign]:
    """Active campaigns with their open comparisons and the user's own judgement count."""
    from django.db.models import Q

    return (
        Campaign.objects.filter(status=Campaign.Status.ACTIVE)
        .annotate(
            n_open=Count("comparisons", filter=Q(comparisons__status="open", comparisons__is_gold=False), distinct=True),
            n_mine=Count("comparisons__judgements", filter=Q(comparisons__judgements__annotator=user), distinct=True),
        )
        .order_by("name")
    )


def assignment_screen_payload(*, assignment_id: int) -> dict:
    """An assignment in screen terms (left/right), never naming the policies: one query."""
    from annotate.models import Assignment

    row = (
        Assignment.objects.filter(pk=assignment_id)
        .values(
            "id", "left_is_a", "leased_until", "comparison__campaign_id", "comparison__task__prompt",
            "comparison__trajectory_a__steps", "comparison__trajectory_a__answer",
            "comparison__trajectory_b__steps", "comparison__trajectory_b__answer",
            "comparison__campaign__dimensions", "comparison__campaign__rationale_required",
        )
        .get()
    )
    a = {"steps": row["comparison__trajectory_a__steps"], "answer": row["comparison__trajectory_a__answer"]}
    b = {"steps": row["comparison__trajectory_b__steps"], "answer": row["comparison__trajectory_b__answer"]}
    left, right = (a, b) if row["left_is_a"] else (b, a)
    return {
        "id": row["id"],
        "campaign": row["comparison__campaign_id"],
        "leased_until": row["leased_until"],
        "prompt": row["comparison__task__prompt"],
        "left": left,
        "right": right,
        "dimensions": row["comparison__campaign__dimensions"],
        "rationale_required": row["comparison__campaign__rationale_required"],
    }
