"""The reward-model registry: models with their data and figures, margins per comparison."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotate.models import Campaign
from rewardmodel.models import CampaignRewardModel, ComparisonScore, RewardModel
from rewardmodel.services import campaign_reward_model_set
from webapp.access import role_required
from webapp.charts import bar_chart_svg
from webapp.roles import Role


@role_required(Role.RESEARCHER, Role.ADMIN)
def registry(request: HttpRequest) -> HttpResponse:
    models = RewardModel.objects.select_related("snapshot", "run").order_by("-created_at")[:200]
    current = {c.campaign.name: c.reward_model_id for c in CampaignRewardModel.objects.select_related("campaign")}
    return render(request, "rewardmodel/registry.html", {"models": models, "current": current})


def _reliability_chart(metrics: dict):
    bins = [b for b in (metrics.get("test") or {}).get("reliability", []) if b.get("count")]
    labels = [f"{b['low']:.2f}–{b['high']:.2f} (n={b['count']})" for b in bins]
    hover = [
        f"confidence {b['low']:.2f} to {b['high']:.2f}: accuracy {100 * b['accuracy']:.1f}% over {b['count']} pairs"
        for b in bins
    ]
    return bar_chart_svg(
        labels,
        [b["accuracy"] for b in bins],
        max_value=1.0,
        unit="%",
        hover=hover,
        title="Reliability: accuracy per confidence bin",
    )


@role_required(Role.RESEARCHER, Role.ADMIN)
def detail(request: HttpRequest, model_id: int) -> HttpResponse:
    model = get_object_or_404(RewardModel.objects.select_related("snapshot", "run", "created_by"), pk=model_id)
    return render(
        request,
        "rewardmodel/detail.html",
        {
            "model": model,
            "m": model.metrics,
            "chart": _reliability_chart(model.metrics),
            "campaigns": Campaign.objects.order_by("name"),
            "used_by": CampaignRewardModel.objects.filter(reward_model=model).select_related("campaign"),
            "scored": Campaign.objects.filter(comparisons__reward_scores__reward_model=model).distinct(),
        },
    )


@require_POST
@role_required(Role.ADMIN)
def use_for_campaign(request: HttpRequest, model_id: int) -> HttpResponse:
    model = get_object_or_404(RewardModel, pk=model_id)
    campaign = get_object_or_404(Campaign, pk=request.POST.get("campaign") or 0)
    campaign_reward_model_set(campaign=campaign, reward_model=model, user=request.user)
    messages.success(request, f"{model} is now the current reward model of {campaign.name}.")
    return redirect("rewardmodel:detail", model_id=model.pk)


@role_required(Role.ADMIN)
def margins(request: HttpRequest, model_id: int, campaign_id: int) -> HttpResponse:
    """Each comparison's margin (score A minus score B) beside its votes; the closest first."""
    model = get_object_or_404(RewardModel, pk=model_id)
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    scores = (
        ComparisonScore.objects.filter(reward_model=model, comparison__campaign=campaign)
        .select_related("comparison", "comparison__task")
        .order_by("comparison__priority", "comparison_id")
    )
    rows = sorted(scores, key=lambda s: (-s.comparison.priority, abs(s.margin)))[:500]
    return render(request, "rewardmodel/margins.html", {"model": model, "campaign": campaign, "rows": rows})
