"""Run pages: the list, launch forms (admins), a run's live page and its artifact files, cancel
and resume."""

from __future__ import annotations

from dataclasses import fields

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.configs import config_from_input
from webapp.access import role_required
from webapp.charts import metric_charts
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.roles import Role
from webapp.runs.forms import RunLaunchForm
from webapp.runs.kinds import all_kinds, get_kind
from webapp.runs.selectors import (
    run_artifact_file,
    run_artifacts,
    run_estimate,
    run_metric_series,
    runs_filtered,
    summary_rows,
)
from webapp.runs.services import run_cancel, run_launch, run_resume
from webapp.workers import minutes_left, queue_state, run_queue, run_wait

VIEW_ROLES = (Role.RESEARCHER, Role.ADMIN)


@role_required(*VIEW_ROLES)
def runs(request: HttpRequest) -> HttpResponse:
    kind, status = request.GET.get("kind", ""), request.GET.get("status", "")
    # Filters from the address bar: anything but a known kind or status means no filter.
    kind = kind if get_kind(kind) else ""
    status = status if status in Run.Status.values else ""
    return render(
        request,
        "webapp/runs.html",
        {
            "runs": runs_filtered(kind=kind, status=status)[:200],
            "kinds": all_kinds(),
            "statuses": Run.Status,
            "kind": kind,
            "status": status,
            "workers": queue_state(settings.RUN_QUEUE),
        },
    )


@role_required(Role.ADMIN)
def run_new(request: HttpRequest, kind: str) -> HttpResponse:
    run_kind = get_kind(kind)
    if run_kind is None:
        raise Http404("No such run kind.")
    # A link may fill in settings (?campaign_id=3 from a campaign's page); the form checks them on launch.
    initial = {k: v[:200] for k, v in request.GET.items() if k in {f.name for f in fields(run_kind.config_class)}}
    form = RunLaunchForm(run_kind, request.POST or None, initial=initial)
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            run = run_launch(
                kind=kind,
                config=form.config(),
                user=request.user,
                name=form.cleaned_data["name"],
                idempotency_key=form.cleaned_data["idempotency_key"],
            )
        except ArbiterError as exc:
            error = exc.message
        else:
            return redirect("runs:detail", run_id=run.pk)
    status = 400 if request.method == "POST" else 200
    context = {"kind": run_kind, "form": form, "error": error, "estimate": run_estimate(run_kind, _shown_config(form))}
    return render(request, "webapp/run_new.html", context, status=status)


def _shown_config(form: RunLaunchForm):
    """The config the form shows (what was posted, else its starting values), for its estimate; the
    kind's defaults where that cannot be read."""
    cls = form.kind.config_class
    values = (
        form.config()
        if form.is_bound and hasattr(form, "cleaned_data")
        else {name: form.get_initial_for_field(form.fields[name], name) for name in form.config_names}
    )
    try:
        return config_from_input(cls, {k: v for k, v in values.items() if v is not None})
    except ValueError:
        return cls()


@role_required(*VIEW_ROLES)
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run; while it is active its live section polls itself and stops when the run ends."""
    run = get_object_or_404(Run.objects.select_related("created_by"), pk=run_id)
    context = {
        "run": run,
        "metric_groups": metric_charts(run_metric_series(run)),
        "kind": get_kind(run.kind),
        "summary": summary_rows(run.summary),
        "artifacts": run_artifacts(run),
        "wait": run_wait(run),
        "minutes_left": minutes_left([run]) if run.status == Run.Status.RUNNING else None,
        "workers": queue_state(run_queue(run)) if run.is_active else None,
    }
    if request.htmx:
        response = render(request, "webapp/run_detail.html#run-live", context)
        if not run.is_active:
            response.status_code = 286  # htmx: stop polling
        return response
    return render(request, "webapp/run_detail.html", context)


@require_GET
@role_required(*VIEW_ROLES)
def run_artifact(request: HttpRequest, run_id: int, name: str) -> FileResponse:
    """Download one file of a run's artifacts; only files recorded as artifacts and inside the run's folder."""
    run = get_object_or_404(Run, pk=run_id)
    path = run_artifact_file(run, name)
    if path is None:
        raise Http404("This run has no artifact file by that name.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=f"run{run.pk}-{path.name}")


@require_POST
@role_required(Role.ADMIN)
def run_cancel_post(request: HttpRequest, run_id: int) -> HttpResponse:
    get_object_or_404(Run, pk=run_id)
    try:
        run = run_cancel(run_id=run_id)
    except ArbiterError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            "Cancelled."
            if run.status == Run.Status.CANCELLED
            else "Cancel requested: the run stops after its current step.",
        )
    return redirect("runs:detail", run_id=run_id)


@require_POST
@role_required(Role.ADMIN)
def run_resume_post(request: HttpRequest, run_id: int) -> HttpResponse:
    get_object_or_404(Run, pk=run_id)
    try:
        run_resume(run_id=run_id)
    except ArbiterError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Queued again.")
    return redirect("runs:detail", run_id=run_id)
