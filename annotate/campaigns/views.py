"""Campaign pages: the list, a campaign's page (progress, who labels, fill, gold, status,
clone), and its settings form. Thin: read the form, call a service, render."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotate.campaign_access import campaigns_labelable_by, dimensions_of
from annotate.models import Campaign, CampaignFill, ImportBatch, Judge, JudgeMode, Policy, Task
from annotate.selectors import campaign_activity, campaigns_with_progress
from annotate.services.campaign_fill import (
    FILL_STRATEGIES,
    campaign_fill_create,
    fill_preview,
    fill_request_clean,
)
from annotate.services.campaigns import (
    MAX_LEASE_SECONDS,
    MIN_LEASE_SECONDS,
    TRANSITIONS,
    campaign_act,
    campaign_clone,
    campaign_create,
    campaign_update,
)
from annotate.services.gold import gold_import, gold_promote_adjudicated, gold_rows_read, gold_upload_bytes
from core.ids import parse_id
from core.problems import form_field, problem_of, problems_text
from rewardmodel.models import RewardModel
from webapp.access import role_required
from webapp.charts import bar_chart_svg
from webapp.errors import ArbiterError
from webapp.models import Run, User
from webapp.roles import Role, user_has_role

EVERY_ROLE = (Role.ANNOTATOR, Role.RESEARCHER, Role.ADMIN)
READERS = (Role.RESEARCHER, Role.ADMIN)
STRATEGY_LABELS = {
    "all_pairs": "All pairs (up to the cap per task)",
    "outcome_differs": "Outcome differs (one right, one wrong)",
    "policy_vs_policy": "Policy A against policy B (arena)",
    "same_calls_different_answer": "Same pages, different answer",
    "rm_uncertainty": "All pairs, the reward model's least certain first",
}
ACTION_LABELS = {
    "activate": "Start labeling",
    "pause": "Pause",
    "resume": "Resume",
    "close": "Close",
    "reopen": "Reopen",
    "archive": "Archive",
    "unarchive": "Unarchive",
}


@role_required(*EVERY_ROLE)
def campaigns(request: HttpRequest) -> HttpResponse:
    """Campaigns with their progress; readers filter by status, admins create."""
    reader = user_has_role(request.user, *READERS)
    shown = request.GET.get("status", "")
    if shown not in Campaign.Status.values:
        shown = ""
    statuses = (
        [shown]
        if shown and reader
        else (
            [s for s in Campaign.Status.values if s != Campaign.Status.ARCHIVED] if reader else [Campaign.Status.ACTIVE]
        )
    )
    return render(
        request,
        "annotate/campaigns.html",
        {
            "campaigns": campaigns_with_progress(user=request.user, statuses=statuses),
            "statuses": Campaign.Status.values if reader else [],
            "shown": shown,
        },
    )


def _settings_from_post(post) -> dict:
    """The settings form's fields as the service's input (the service checks them)."""
    # Every row the admin left on the form, blank ones too: the service names a row with no name.
    names, scales, descriptions, required = (
        post.getlist(f"dimension_{k}") for k in ("name", "scale", "description", "required")
    )
    required += [""] * (len(names) - len(required))
    dimensions = [
        {"name": n, "scale": s or 5, "description": d, "required": r == "yes"}
        for n, s, d, r in zip(names, scales, descriptions, required)
    ]
    lease_minutes = post.get("lease_minutes", "")
    try:
        lease_seconds = round(float(lease_minutes) * 60) if lease_minutes.strip() else ""
    except (ValueError, OverflowError):
        lease_seconds = lease_minutes  # the service names it
    return {
        "name": post.get("name", ""),
        "guidelines": post.get("guidelines", ""),
        "votes_per_comparison": post.get("votes_per_comparison", ""),
        "lease_seconds": lease_seconds,
        "gold_rate": post.get("gold_rate", ""),
        "dimensions": dimensions,
        "rationale_required": post.get("rationale_required") == "on",
        "deadline": post.get("deadline", ""),
        "pool_only": post.get("pool_only") == "pool",
        "pool": [pk for pk in map(parse_id, post.getlist("pool")) if pk is not None],
        "environment": post.get("environment", ""),
        "task_split": post.get("task_split", ""),
        "judge_mode": post.get("judge_mode", "blind"),
        "shown_judge": post.get("shown_judge", ""),
    }


def _form_context(campaign: Campaign | None, values: dict, errors: dict) -> dict:
    environments = sorted(
        set(Task.objects.exclude(environment="").values_list("environment", flat=True).distinct()[:200])
        | ({values.get("environment")} - {"", None})
    )
    labelers = (
        User.objects.filter(is_active=True, groups__name__in=[Role.ANNOTATOR.value, Role.ADMIN.value])
        .distinct()
        .order_by("username")
    )
    return {
        "campaign": campaign,
        "values": values,
        "errors": errors,
        "environments": environments,
        "labelers": labelers,
        "splits": Task.Split.values,
        "judge_modes": JudgeMode.choices,
        "judges": Judge.objects.order_by("name")[:200],
        "error_summary": [
            (FIELD_LABELS.get(f, "") if f != "__all__" else "", m) for f, messages in errors.items() for m in messages
        ],
    }


# The form's labels for the service's field names, in the summary above the form.
FIELD_LABELS = {
    "name": "Name",
    "guidelines": "Guidelines",
    "votes_per_comparison": "Votes per comparison",
    "lease_seconds": "Lease (minutes)",
    "gold_rate": "Gold rate",
    "deadline": "Deadline",
    "dimensions": "Rating dimensions",
    "rationale_required": "Rationale",
    "pool": "Who may label",
    "pool_only": "Who may label",
    "environment": "Environment",
    "task_split": "Task split",
    "judge_mode": "Judge mode",
    "shown_judge": "Judge shown",
}


def _errors_by_field(exc: ArbiterError, post=None) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for d in exc.details:
        field, message = form_field(d), problem_of(d)["message"]
        if field == "lease_seconds" and post is not None:  # the form asks for minutes: answer in minutes
            message = (
                f"must be a number of minutes between {MIN_LEASE_SECONDS / 60:g} and "
                f"{MAX_LEASE_SECONDS / 60:,.0f} (a week); got {post.get('lease_minutes', '')[:40]!r}."
            )
        errors.setdefault(field, []).append(message)
    return errors or {"__all__": [exc.message]}


def _values_of(campaign: Campaign) -> dict:
    return {
        "name": campaign.name,
        "guidelines": campaign.guidelines,
        "votes_per_comparison": campaign.votes_per_comparison,
        "lease_minutes": campaign.lease_seconds / 60,
        "gold_rate": campaign.gold_rate,
        "dimensions": dimensions_of(campaign),
        "rationale_required": campaign.rationale_required,
        "deadline": campaign.deadline.strftime("%Y-%m-%dT%H:%M") if campaign.deadline else "",
        "pool_only": campaign.pool_only,
        "pool": list(campaign.pool.values_list("pk", flat=True)),
        "environment": campaign.environment,
        "task_split": campaign.task_split,
        "judge_mode": campaign.judge_mode,
        "shown_judge": str(campaign.shown_judge_id or ""),
    }


def _form_values(post) -> dict:
    data = _settings_from_post(post)
    data["lease_minutes"] = post.get("lease_minutes", "")
    data["dimensions"] = data["dimensions"] or []
    return data


@role_required(Role.ADMIN)
def campaign_new(request: HttpRequest) -> HttpResponse:
    values = {"votes_per_comparison": 3, "lease_minutes": 15, "gold_rate": 0, "dimensions": [], "pool": []}
    errors: dict = {}
    if request.method == "POST":
        try:
            campaign = campaign_create(data=_settings_from_post(request.POST), created_by=request.user)
        except ArbiterError as exc:
            values, errors = _form_values(request.POST), _errors_by_field(exc, request.POST)
        else:
            messages.success(request, f"Campaign {campaign.name} created. Fill it with comparisons below.")
            return redirect("annotate:campaign", campaign_id=campaign.pk)
    return render(
        request, "annotate/campaign_form.html", _form_context(None, values, errors), status=400 if errors else 200
    )


@role_required(Role.ADMIN)
def campaign_edit(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    values, errors = _values_of(campaign), {}
    if request.method == "POST":
        try:
            campaign_update(campaign=campaign, data=_settings_from_post(request.POST))
        except ArbiterError as exc:
            values, errors = _form_values(request.POST), _errors_by_field(exc, request.POST)
        else:
            messages.success(request, "Settings saved.")
            return redirect("annotate:campaign", campaign_id=campaign.pk)
    return render(
        request, "annotate/campaign_form.html", _form_context(campaign, values, errors), status=400 if errors else 200
    )


@role_required(Role.ADMIN)
@require_POST
def markdown_preview(request: HttpRequest) -> HttpResponse:
    """The guidelines as annotators will see them (htmx, while the admin types)."""
    return render(
        request,
        "annotate/campaign_form.html#guidelines-preview",
        {"guidelines": request.POST.get("guidelines", "")[:100_000]},
    )


def _fill_choices() -> dict:
    return {
        "strategies": [(s, STRATEGY_LABELS[s]) for s in FILL_STRATEGIES],
        "batches": ImportBatch.objects.filter(status=ImportBatch.Status.SUCCEEDED).order_by("-created_at")[:50],
        "policies": Policy.objects.order_by("name", "version")[:200],
        "rollout_runs": Run.objects.filter(kind="rollout", status=Run.Status.SUCCEEDED).order_by("-created_at")[:50],
        "reward_models": _reward_models(),
        "splits": Task.Split.values,
    }


def _reward_models():

    return RewardModel.objects.order_by("-created_at")[:50]


@role_required(*EVERY_ROLE)
def campaign_detail(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """A campaign's page: progress and who labels it; for admins also fill, gold, status and clone."""
    rows = Campaign.objects.all() if user_has_role(request.user, *READERS) else campaigns_labelable_by(request.user)
    campaign = get_object_or_404(rows, pk=campaign_id)
    campaign = campaigns_with_progress(user=request.user, statuses=Campaign.Status.values, ids=[campaign.pk])[0]
    context = {
        "campaign": campaign,
        "dimensions": dimensions_of(campaign),
        "admin": user_has_role(request.user, Role.ADMIN),
        "reader": user_has_role(request.user, *READERS),
    }
    if context["reader"]:
        activity = campaign_activity(campaign=campaign)
        context["annotators"] = activity["annotators"]
        context["daily_chart"] = bar_chart_svg(
            [d.strftime("%m-%d") for d, _ in activity["daily"]],
            [n for _, n in activity["daily"]],
            title="Judgements per day",
        )
    if context["admin"]:
        context.update(_fill_choices())
        context["actions"] = [(a, ACTION_LABELS[a]) for a in TRANSITIONS[campaign.status]]
        context["fills"] = campaign.fills.order_by("-created_at")[:10]
        context["adjudicated"] = campaign.comparisons.filter(adjudicated_choice__isnull=False, is_gold=False).count()
        context["gold_count"] = campaign.comparisons.filter(is_gold=True).count()
        context["pool"] = campaign.pool.order_by("username")
    return render(request, "annotate/campaign_detail.html", context)


@role_required(Role.ADMIN)
@require_POST
def campaign_status(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        campaign = campaign_act(campaign=campaign, action=request.POST.get("action", ""))
    except ArbiterError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{campaign.name} is {campaign.status} now.")
    return redirect("annotate:campaign", campaign_id=campaign.pk)


@role_required(Role.ADMIN)
@require_POST
def campaign_clone_post(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        copy = campaign_clone(campaign=campaign, name=request.POST.get("name", ""), created_by=request.user)
    except ArbiterError as exc:
        messages.error(request, exc.message)
        return redirect("annotate:campaign", campaign_id=campaign.pk)
    messages.success(request, f"Cloned into {copy.name}: the settings, guidelines and pool, no comparisons.")
    return redirect("annotate:campaign", campaign_id=copy.pk)


def _fill_input(post) -> dict:
    return {
        "strategy": post.get("strategy", "all_pairs"),
        "max_per_task": post.get("max_per_task", ""),
        "import_batches": post.getlist("import_batches"),
        "policies": post.getlist("policies"),
        "runs": post.getlist("runs"),
        "split": post.get("split", ""),
        "tags": post.get("tags", ""),
        "policy_a": post.get("policy_a") or None,
        "policy_b": post.get("policy_b") or None,
        "reward_model": post.get("reward_model") or None,
        "all_trajectories": post.get("all_trajectories") == "on",
    }


@role_required(Role.ADMIN)
@require_POST
def campaign_fill(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Preview (htmx, `preview=1`) or build comparisons from stored trajectories."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        fill_request = fill_request_clean(_fill_input(request.POST))
        if request.POST.get("preview"):
            return render(
                request,
                "annotate/campaign_detail.html#fill-preview",
                {"preview": fill_preview(campaign=campaign, request=fill_request)},
            )
        fill = campaign_fill_create(campaign=campaign, request=fill_request, created_by=request.user)
    except ArbiterError as exc:
        if request.POST.get("preview"):
            return render(request, "annotate/campaign_detail.html#fill-preview", {"error": exc.message})
        messages.error(request, exc.message)
        return redirect("annotate:campaign", campaign_id=campaign.pk)
    if fill.status == fill.Status.FAILED:
        messages.error(request, fill.message)
    elif fill.finished and not fill.created_count:
        messages.warning(request, fill.message)
    elif fill.finished:
        messages.success(request, fill.message)
    else:
        messages.info(request, "The fill is large: a worker builds it; its progress is below.")
    return redirect("annotate:campaign", campaign_id=campaign.pk)


@role_required(Role.ADMIN)
def campaign_fill_status(request: HttpRequest, campaign_id: int, fill_id: int) -> HttpResponse:
    """One fill's row (htmx polls it while it runs, and stops when it is done)."""
    fill = get_object_or_404(CampaignFill.objects.select_related("campaign"), pk=fill_id, campaign_id=campaign_id)
    response = render(request, "annotate/campaign_detail.html#fill-row", {"fill": fill, "campaign": fill.campaign})
    if fill.finished:
        response.status_code = 286  # htmx: stop polling
    return response


@role_required(Role.ADMIN)
@require_POST
def campaign_gold(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Upload gold comparisons (JSONL or CSV), all or nothing."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        upload = request.FILES.get("file")
        if upload is None:
            raise ArbiterError("Choose a JSONL or CSV file of gold comparisons.")
        counts = gold_import(
            campaign=campaign, rows=gold_rows_read(gold_upload_bytes(upload), filename=upload.name or "")
        )
    except RequestDataTooBig as exc:
        messages.error(request, str(exc))
    except ArbiterError as exc:
        lines = problems_text(exc.details, limit=10)
        messages.error(request, exc.message + (f" {lines}" if lines else ""))
    else:
        messages.success(request, f"Gold stored: {counts['marked']} comparisons marked, {counts['created']} created.")
    return redirect("annotate:campaign", campaign_id=campaign.pk)


@role_required(Role.ADMIN)
@require_POST
def campaign_gold_promote(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    promoted = gold_promote_adjudicated(campaign=campaign)
    messages.success(request, f"{promoted} adjudicated comparison{'s' if promoted != 1 else ''} became gold.")
    return redirect("annotate:campaign", campaign_id=campaign.pk)
