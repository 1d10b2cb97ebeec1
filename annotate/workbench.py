"""The comparison screen's context: an assignment shown in screen terms, never naming policies."""
from __future__ import annotations

from annotate.models import Assignment, Campaign
from annotate.quality import campaign_progress
from annotate.services.campaigns import dimensions_of
from annotate.trajectory_view import pair_view

SCREEN_SCALE = [
    (1, "Left much better"),
    (2, "Left better"),
    (3, "Tie"),
    (4, "Right better"),
    (5, "Right much better"),
]
SKIP_REASONS = ["Cannot judge: needs expertise", "Unreadable or broken", "Identical trajectories", "Other"]


def screen_sides(assignment: Assignment):
    comparison = assignment.comparison
    a, b = comparison.trajectory_a, comparison.trajectory_b
    return (a, b) if assignment.left_is_a else (b, a)


def workbench_context(*, campaign: Campaign, annotator, assignment: Assignment | None,
                      form=None, error: str = "") -> dict:
    context = {
        "campaign": campaign,
        "dimensions": [{**d, "points": range(1, d["scale"] + 1)} for d in dimensions_of(campaign)],
        "assignment": assignment,
        "progress": campaign_progress(campaign=campaign, annotator=annotator),
        "scale": SCREEN_SCALE,
        "skip_reasons": SKIP_REASONS,
        "form": form,
        "error": error,
    }
    if assignment is not None:
        left, right = screen_sides(assignment)
        context.update(
            prompt=assignment.comparison.task.prompt,
            pair=pair_view(left.steps, right.steps),
            left_answer=left.answer,
            right_answer=right.answer,
        )
    return context
