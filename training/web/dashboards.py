"""The before/after dashboards: the evaluations, one evaluation's table, what changed in
behaviour per situation, curves and human evaluations, the side-by-side view of two systems
task by task (one situation at a time, where the two episodes part marked), and the report's
exports.

Every figure comes from `dashboard_report` (the evaluation's report with its loop), which the
exports and the API render too.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotate.trajectory_view import pair_view
from training.evaluation.behaviour import evaluation_situations, figure_words
from training.evaluation.divergence import first_divergence, step_words
from training.evaluation.forms import CompareForm, HumanEvaluationForm
from training.evaluation.metrics import measured
from training.evaluation.selectors import (
    evaluation_default_candidate,
    evaluation_pairs_page,
    evaluation_report_csv,
    evaluations_list,
)
from training.evaluation.services import human_evaluation_create
from training.loop.report import dashboard_report, loop_curves
from training.loop.rounds import active_round_run, latest_round
from training.models import Evaluation, LoopRound
from webapp.access import role_required
from webapp.charts import line_chart_svg
from webapp.errors import ArbiterError
from webapp.roles import Role, user_has_role
from webapp.runs.services import run_launch

VIEW_ROLES = (Role.RESEARCHER, Role.ADMIN)
# The table's columns: (metric, heading, how its figures are written; see the `interval` filter).
COLUMNS = (
    ("success", "Success", "percent"),
    ("f1", "F1", "3"),
    ("quote_support", "Quote support", "3"),
    ("rm_score", "RM score", "3"),
    ("steps", "Steps", "2"),
    ("tool_errors", "Tool errors", "2"),
    ("kl", "KL (nats)", "2"),
)
CURVES = (
    ("rm_score", "Reward-model score"),
    ("dev_success", "Dev rubric success (sampled)"),
    ("sqrt_kl", "sqrt(KL to the start)"),
)


def _columns(report: dict) -> list[tuple]:
    """The columns the evaluated environment has figures for."""
    shown = measured(
        [metric for metric, _, _ in COLUMNS],
        [figures for system in report["systems"] for figures in system["metrics"].values()],
    )
    return [column for column in COLUMNS if column[0] in shown]


def _tables(report: dict, columns: list[tuple]) -> list[dict]:
    """Per mode, a row per system with its cells in column order."""
    return [
        {
            "mode": mode,
            "rows": [
                {
                    "system": system,
                    "cells": [(system["metrics"][mode].get(metric), style) for metric, _, style in columns],
                    "difference": system["success_vs_baseline"].get(mode),
                }
                for system in report["systems"]
                if mode in system["metrics"]
            ],
        }
        for mode in report["modes"]
    ]


def _behaviour(report: dict) -> dict:
    """The panel "What changed in behaviour": the report's figures, each mode's heading in words
    (the baseline's episodes: a row played otherwise says so in its cells), and per row the mode
    its side-by-side link opens on (greedy where it was played: what a user deploys)."""
    behaviour = report["behaviour"]
    baseline = next((s for s in report["systems"] if s["is_baseline"]), None)
    heads = [
        {"mode": mode, "words": figure_words(baseline, baseline, mode, report["config"]) if baseline else mode}
        for mode in behaviour["modes"]
    ]
    situations = [
        {
            **situation,
            "rows": [
                {
                    **row,
                    "cells": [
                        {
                            "head": head,
                            "figure": row["figures"].get(head["mode"]),
                            "difference": row["vs_baseline"].get(head["mode"]),
                        }
                        for head in heads
                    ],
                    "link_mode": "greedy" if "greedy" in row["figures"] else next(iter(row["figures"]), "sampled"),
                }
                for row in situation["systems"]
            ],
        }
        for situation in behaviour["situations"]
    ]
    return {**behaviour, "situations": situations, "heads": heads}


def _curves(report: dict) -> list[dict]:
    """Per PPO run, its three curves side by side on one iteration axis, the best checkpoint marked."""
    found = []
    for run in report["rl_runs"]:
        steps = [point[0] for points in run["curves"].values() for point in points]
        best = run["best_iteration"]
        markers = [(best, f"best by dev rubric: iteration {best}")] if best is not None else []
        titles = dict(CURVES)
        if run["reward"] != "reward_model":
            titles["rm_score"] = f"Training reward ({run['reward']})"
        charts = [
            line_chart_svg(
                {title.lower(): run["curves"][key]},
                title=title,
                x_label="iteration",
                markers=markers,
                x_range=(min(steps), max(steps)) if steps else None,
                unit="%" if key == "dev_success" else "",
            )
            for key, title in titles.items()
        ]
        found.append({"run": run, "charts": charts})
    return found


@role_required(*VIEW_ROLES)
def evaluations(request: HttpRequest) -> HttpResponse:
    return render(request, "training/evaluations.html", {"evaluations": evaluations_list()[:200]})


@role_required(*VIEW_ROLES)
def evaluation(request: HttpRequest, evaluation_id: int) -> HttpResponse:
    """The before/after page; admins POST here to build a blind human evaluation."""
    row = get_object_or_404(
        Evaluation.objects.select_related("run", "reward_model__snapshot", "reference_policy"), pk=evaluation_id
    )
    form = HumanEvaluationForm(row, request.POST if request.method == "POST" else None)
    error = ""
    if request.method == "POST":
        if not user_has_role(request.user, Role.ADMIN):
            raise PermissionDenied("Only admins build human evaluations.")
        if form.is_valid():
            try:
                human = human_evaluation_create(evaluation=row, created_by=request.user, **form.cleaned_data)
            except ArbiterError as exc:
                error = exc.message
            else:
                messages.success(
                    request,
                    f"Campaign “{human.campaign.name}” built with "
                    f"{human.campaign.comparisons.count()} comparisons "
                    f"({human.identical_pairs} identical pairs left out).",
                )
                return redirect("training:evaluation", evaluation_id=row.pk)
    report = dashboard_report(row)
    columns = _columns(report)
    return render(
        request,
        "training/evaluation.html",
        {
            "evaluation": row,
            "report": report,
            "columns": columns,
            "tables": _tables(report, columns),
            "curves": _curves(report),
            "behaviour": _behaviour(report),
            "form": form,
            "error": error,
            "loop": _loop(report),
        },
        status=400 if request.method == "POST" else 200,
    )


def _audit_title(rows: list[dict]) -> str:
    """Whose verdicts the audit chart shows: simulated annotators', people's, or both by round."""
    labels = {row.get("labels") for row in rows if row.get("number")}
    if labels == {"simulated"}:
        return "Audit: simulated annotators' verdicts"
    if labels == {"people"}:
        return "Audit: people's verdicts"
    return "Audit: verdicts (simulated or people's by round: see the table)"


def _loop(report: dict) -> dict | None:
    """The loop this evaluation is a round of: its rounds, their curves and what comes next."""
    if report["loop"] is None:
        return None
    rows = report["loop"]["rounds"]
    curves = loop_curves(rows)
    x_range = (0, max(1, rows[-1]["number"]))
    charts = [
        line_chart_svg(
            {"T=1": curves["success"], "greedy": curves["greedy_success"]},
            title="Rubric success on held-out tasks",
            x_label="round",
            x_range=x_range,
            unit="%",
        ),
        line_chart_svg(
            {"favourite preferred": curves["audit_top"], "sides with the model": curves["audit_disagreement"]},
            title=_audit_title(rows),
            x_label="round",
            x_range=x_range,
            unit="%",
        ),
        line_chart_svg(
            {"RM score": curves["rm_score"]},
            title="Reward-model score (each round's model)",
            x_label="round",
            x_range=x_range,
            unit="",
        ),
        line_chart_svg(
            {"sqrt(KL)": curves["sqrt_kl"]},
            title="sqrt(KL to round one's start)",
            x_label="round",
            x_range=x_range,
            unit="",
        ),
    ]
    name = report["loop"]["name"]
    return {
        "name": name,
        "number": report["loop"]["round"],
        "rows": rows,
        "charts": charts,
        "latest": latest_round(name),
        "active_run": active_round_run(name),
    }


@require_POST
@role_required(Role.ADMIN)
def evaluation_next_round(request: HttpRequest, evaluation_id: int) -> HttpResponse:
    """Launch the "round" run that takes this evaluation's loop one round further."""
    loop_round = get_object_or_404(LoopRound, evaluation_id=evaluation_id)
    labels = request.POST.get("labels", "simulated")
    try:
        run = run_launch(
            kind="round",
            config={"loop": loop_round.loop, "labels": labels},
            user=request.user,
            name=f"{loop_round.loop} next round",
            idempotency_key=request.POST.get("key", "")[:64],
        )
    except ArbiterError as exc:
        messages.error(request, exc.message)
        return redirect("training:evaluation", evaluation_id=evaluation_id)
    messages.success(request, f"Run #{run.pk} takes {loop_round.loop} a round further.")
    return redirect("runs:detail", run.pk)


def _compare_row(row: dict) -> dict:
    """A task's two episodes with their aligned steps and where they first part (the same step
    index on both sides), each side's step there in words."""
    before, after = row["before"].trajectory.steps, row["after"].trajectory.steps
    divergence = first_divergence(before, after)
    return {
        **row,
        "pair": pair_view(before, after),
        "divergence": divergence,
        "divergence_before": step_words(before, divergence),
        "divergence_after": step_words(after, divergence),
    }


@role_required(*VIEW_ROLES)
def evaluation_compare(request: HttpRequest, evaluation_id: int) -> HttpResponse:
    """Per task, the baseline's and a candidate's episode (sample 0) side by side, the first
    divergent step marked; `situation` keeps the tasks of one situation (the behaviour panel's links)."""
    row = get_object_or_404(Evaluation, pk=evaluation_id)
    baseline = row.entries.filter(is_baseline=True).first()
    form = CompareForm(row, request.GET)
    situations = evaluation_situations(row)
    situation = request.GET.get("situation", "")
    context = {
        "evaluation": row,
        "baseline": baseline,
        "form": form,
        "candidates": row.entries.filter(is_baseline=False).order_by("position", "id"),
        "situations": situations,
        "situation": situation,
    }
    if not form.is_valid():
        return render(request, "training/evaluation_compare.html", context, status=400)
    if situation and situation not in situations:
        # Checked against the evaluation's own situations before any query reads it.
        context["situation_error"] = (
            f"No task of this evaluation is in that situation; its situations: {', '.join(situations)}."
            if situations
            else "The environment of this evaluation names no situations."
        )
        return render(request, "training/evaluation_compare.html", context, status=400)
    candidate = form.cleaned_data["candidate"] or evaluation_default_candidate(row)
    mode, differ = form.cleaned_data["mode"] or "sampled", form.cleaned_data["differ"]
    context.update({"candidate": candidate, "mode": mode, "differ": differ})
    if baseline is not None and candidate is not None:
        page, total = evaluation_pairs_page(
            baseline=baseline,
            candidate=candidate,
            mode=mode,
            differ=differ,
            page=request.GET.get("page"),
            situation=situation,
        )
        query = request.GET.copy()
        query.pop("page", None)
        context.update(
            {
                "page": page,
                "total": total,
                "query": query.urlencode(),
                "rows": [_compare_row(r) for r in page.object_list],
            }
        )
    return render(request, "training/evaluation_compare.html", context)


@role_required(*VIEW_ROLES)
def evaluation_export(request: HttpRequest, evaluation_id: int, fmt: str) -> HttpResponse:
    """The report as JSON, or as CSV with one row per (system, mode, metric)."""
    if fmt not in ("json", "csv"):
        raise Http404("Exports are .json or .csv.")
    report = dashboard_report(get_object_or_404(Evaluation, pk=evaluation_id))
    if fmt == "json":
        response = JsonResponse(report, json_dumps_params={"indent": 2})
    else:
        response = HttpResponse(evaluation_report_csv(report), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="arbiter-evaluation-{evaluation_id}.{fmt}"'
    return response
