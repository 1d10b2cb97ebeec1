"""Policy pages: which policies exist, where each came from, and how it did."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotate.models import Policy
from training.evaluation.selectors import evaluations_for_policy
from training.policy.chat import tool_parser_of
from webapp.access import role_required
from webapp.roles import Role


@role_required(Role.RESEARCHER, Role.ADMIN)
def policies(request: HttpRequest) -> HttpResponse:
    rows = Policy.objects.select_related("run", "parent").annotate(n_trajectories=Count("trajectories"))
    return render(request, "training/policies.html", {"policies": rows.order_by("-created_at")[:200]})


@role_required(Role.RESEARCHER, Role.ADMIN)
def policy(request: HttpRequest, policy_id: int) -> HttpResponse:
    row = get_object_or_404(Policy.objects.select_related("run", "parent"), pk=policy_id)
    evaluation = (row.metadata or {}).get("eval", {})
    parser, how = tool_parser_of(row.model_dir) if row.model_dir else ("", "unknown")
    return render(
        request,
        "training/policy.html",
        {
            "policy": row,
            "evaluation": evaluation,
            "tool_parser": parser,
            "tool_parser_how": how,
            "n_trajectories": row.trajectories.count(),
            "children": row.children.order_by("-created_at")[:50],
            "evaluations": evaluations_for_policy(policy=row)[:50],
        },
    )
