"""Pages of the annotation app (HTML and HTMX fragments). Thin: validate, call a service, render."""

from __future__ import annotations

from dataclasses import replace

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from annotate.campaign_access import dimensions_of
from annotate.forms import AdjudicateForm, ImportUploadForm, JudgementForm, SkipForm, correction_body
from annotate.judgement_input import SCREEN_SCALE
from annotate.judges.quality import campaign_judge_panels
from annotate.judges.votes import ORDERINGS, campaign_order
from annotate.models import Assignment, Campaign, Comparison, Correction, ImportBatch, Judgement
from annotate.quality import campaign_quality, comparisons_in_disagreement
from annotate.selectors import (
    campaign_notices,
    campaigns_for_labeling,
    domain_counts,
    import_batches_recent,
)
from annotate.services.assignments import (
    LEASE_LOST,
    assignment_next,
    assignment_skip,
    comparison_adjudicate,
    judgement_submit,
)
from annotate.services.corrections import MAX_BODY_BYTES, correction_submit, replay_state, replay_words
from annotate.services.drafts import draft_keep_refused
from annotate.services.imports import import_upload_create
from annotate.services.revisions import (
    REVISABLE_LAST,
    JudgementFrozen,
    judgement_frozen_reason,
    judgement_last_id,
    judgement_revise,
    judgements_recent,
)
from annotate.trajectory_view import pair_view
from annotate.workbench import after_vote_words, judge_after_submit, revise_context, workbench_context
from webapp.access import role_required
from webapp.charts import bar_chart_svg, histogram_svg, interval_chart_svg
from webapp.errors import ArbiterError
from webapp.estimates import DEFAULT_POLICY_TRAINING
from webapp.models import Run
from webapp.roles import Role, annotator_label, user_has_role
from webapp.uploads import body_too_big

LABELERS = (Role.ANNOTATOR, Role.ADMIN)
READERS = (Role.RESEARCHER, Role.ADMIN)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The home page: what each of the user's roles may do, and what Arbiter holds."""
    active = campaigns_for_labeling(user=request.user)
    return render(
        request,
        "webapp/home.html",
        {
            "counts": domain_counts(),
            "campaigns": [c for c in active if c.progress["left_for_you"]][:10],
            "notices": campaign_notices(campaigns=active) if user_has_role(request.user, Role.ADMIN) else [],
            "first_start": _default_policy_in_training(),
        },
    )


def _default_policy_in_training():
    """A behaviour-cloning run whose success fills a campaign (the first `make run`: the default
    policy, then "Demo: encyclopedia QA"), while it is queued or running, with that campaign:
    the home page says what is happening and what follows."""
    run = (
        Run.objects.filter(kind="bc", status__in=("queued", "running"), config__rollout_campaign_id__gt=0)
        .order_by("-created_at")
        .first()
    )
    if run is None:
        return None
    campaign = Campaign.objects.filter(pk=run.config.get("rollout_campaign_id")).first()
    return {"run": run, "campaign": campaign, "estimate": DEFAULT_POLICY_TRAINING}


@role_required(Role.ADMIN)
def imports(request: HttpRequest) -> HttpResponse:
    """Upload a JSONL file of trajectories and follow earlier imports."""
    too_big = ""
    try:
        form = ImportUploadForm(request.POST or None, request.FILES or None)
    except RequestDataTooBig as exc:  # refused while the body arrived (webapp/uploads.py)
        form, too_big = ImportUploadForm(), str(exc)
    if request.method == "POST" and not too_big and form.is_valid():
        try:
            batch = import_upload_create(
                upload=form.cleaned_data["file"],
                campaign=form.cleaned_data["campaign"],
                created_by=request.user,
                format=form.cleaned_data["format"],
                partial_traces=form.cleaned_data["partial_traces"],
            )
        except ArbiterError as exc:
            form.add_error("file", exc.message)
        else:
            if not batch.finished:
                messages.info(request, f"{batch.filename} is large: it is being imported by a job.")
            return redirect("annotate:import-detail", batch_id=batch.id)
    status = 413 if too_big else (400 if form.errors else 200)
    return render(
        request,
        "annotate/imports.html",
        {"form": form, "too_big": too_big, "batches": import_batches_recent()},
        status=status,
    )


@role_required(Role.ADMIN)
def import_detail(request: HttpRequest, batch_id: int) -> HttpResponse:
    """One import; while it runs, the status fragment polls itself and stops when done."""
    batch = get_object_or_404(ImportBatch.objects.select_related("campaign"), pk=batch_id)
    if request.htmx:
        response = render(request, "annotate/import_detail.html#import-status", {"batch": batch})
        if batch.finished:
            response.status_code = 286  # htmx: stop polling
        return response
    return render(request, "annotate/import_detail.html", {"batch": batch})


def _align(data) -> str:
    """The comparison screen's alignment, from ?align= or the forms' hidden field: content unless index."""
    return "index" if data.get("align") == "index" else "content"


def _label_url(campaign, align: str) -> str:
    url = reverse("annotate:label", args=[campaign.id])
    return f"{url}?align=index" if align == "index" else url


def _workbench(
    request,
    campaign,
    *,
    assignment=None,
    form=None,
    error="",
    status=200,
    align="content",
    next_after_error=False,
    after_vote=None,
):
    """The workbench with `assignment`, or the annotator's next one (also after an `error` when
    `next_after_error`: a lost lease says so above the next comparison)."""
    if assignment is None and (next_after_error or not error):
        try:
            assignment = assignment_next(campaign=campaign, annotator=request.user)
        except ArbiterError as exc:
            error = f"{error} {exc.message}".strip()
        if next_after_error:
            error += " The next comparison is below." if assignment else " Nothing else is waiting for you here."
    context = workbench_context(
        campaign=campaign,
        annotator=request.user,
        assignment=assignment,
        form=form,
        error=error,
        align=align,
        after_vote=after_vote,
    )
    template = "annotate/label.html#workbench" if request.htmx else "annotate/label.html"
    # htmx swaps 2xx only: a refused submit shows its message in the fragment it replaces.
    return render(request, template, context, status=200 if request.htmx else status)


@role_required(*LABELERS)
def label(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The comparison screen: the current assignment, or a new one."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return _workbench(request, campaign, align=_align(request.GET))


def _own_assignment(request, assignment_id) -> Assignment:
    assignment = (
        Assignment.objects.select_related(
            "comparison__campaign", "comparison__task", "comparison__trajectory_a", "comparison__trajectory_b"
        )
        .filter(pk=assignment_id, annotator=request.user)
        .first()
    )
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you.")
    return assignment


@role_required(*LABELERS)
def judgement_post(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Submit a verdict; the next comparison replaces this one (HTMX) or the page reloads."""
    if request.method != "POST":
        return redirect("annotate:campaigns")
    try:
        assignment = _own_assignment(request, assignment_id)
    except ArbiterError as exc:
        return render(request, "annotate/error.html", {"message": exc.message}, status=400)
    campaign = assignment.comparison.campaign
    align = _align(request.POST)
    form = JudgementForm(request.POST, dimensions=dimensions_of(campaign))
    if not form.is_valid():
        message = " ".join(e for errors in form.errors.values() for e in errors)
        draft_keep_refused(assignment_id=assignment.id, annotator=request.user, posted=request.POST)
        return _workbench(request, campaign, assignment=assignment, form=form, error=message, status=400, align=align)
    try:
        judgement, _ = judgement_submit(assignment_id=assignment.id, annotator=request.user, verdict=form.verdict)
    except ArbiterError as exc:
        if exc.message == LEASE_LOST:
            return _workbench(request, campaign, error=exc.message, status=409, align=align, next_after_error=True)
        draft_keep_refused(assignment_id=assignment.id, annotator=request.user, posted=request.POST)
        return _workbench(
            request, campaign, assignment=assignment, form=form, error=exc.message, status=400, align=align
        )
    after_vote = judge_after_submit(judgement=judgement, assignment=assignment)
    if not request.htmx:
        if after_vote:
            messages.info(request, _after_text(after_vote))
        return redirect(_label_url(campaign, align))
    return _workbench(request, campaign, align=align, after_vote=after_vote)


def _after_text(vote: dict) -> str:
    return f"On the comparison you just judged, {vote['judge']} said {vote['text']}{after_vote_words(vote)}."


@role_required(*LABELERS)
def correction_post(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """A correction of one side of the comparison on the screen (the correction form). HTMX gets
    the result under the form; without it, the page again with the result as a message."""
    if request.method != "POST":
        return redirect("annotate:campaigns")
    context: dict = {}
    try:
        body_too_big(request, MAX_BODY_BYTES, "a correction")
        correction, note = correction_submit(
            assignment_id=assignment_id, annotator=request.user, body=correction_body(request.POST)
        )
        context.update(_correction_context(correction))
    except ArbiterError as exc:
        context.update(error=exc.message, problems=exc.details)
    except (PermissionDenied, RequestDataTooBig) as exc:
        context.update(error=str(exc), problems=[])
    if request.htmx:  # htmx swaps 2xx only: a refusal shows its reasons in the fragment
        return render(request, "annotate/label.html#correction-result", context)
    if "correction" in context:
        messages.success(request, _correction_text(context["correction"]))
    else:
        messages.error(request, context["error"])
    campaign_id = Assignment.objects.filter(pk=assignment_id).values_list("comparison__campaign_id", flat=True).first()
    return redirect("annotate:label", campaign_id=campaign_id) if campaign_id else redirect("annotate:campaigns")


def _correction_text(correction) -> str:
    return f"Correction #{correction.pk} {replay_words(correction)}; a reviewer will accept or reject it."


def _correction_context(correction) -> dict:
    state, _ = replay_state(correction)
    return {"correction": correction, "how": replay_words(correction), "replaying": state in ("queued", "running")}


@role_required(*LABELERS)
def correction_state(request: HttpRequest, correction_id: int) -> HttpResponse:
    """How the author's correction stands (the labeling screen polls it while its replay waits for
    or runs on a worker)."""
    correction = get_object_or_404(
        Correction.objects.select_related("original__task", "replay"), pk=correction_id, author=request.user
    )
    return render(request, "annotate/label.html#correction-result", _correction_context(correction))


@role_required(*LABELERS)
def skip_post(request: HttpRequest, assignment_id: int) -> HttpResponse:
    if request.method != "POST":
        return redirect("annotate:campaigns")
    form = SkipForm(request.POST)
    try:
        assignment = _own_assignment(request, assignment_id)
        if not form.is_valid():
            raise ArbiterError("Say why you skip.")
        assignment_skip(assignment_id=assignment.id, annotator=request.user, reason=form.cleaned_data["reason"])
    except ArbiterError as exc:
        return render(request, "annotate/error.html", {"message": exc.message}, status=400)
    campaign = assignment.comparison.campaign
    align = _align(request.POST)
    if not request.htmx:
        return redirect(_label_url(campaign, align))
    return _workbench(request, campaign, align=align)


def _revisable(judgement, recent) -> str:
    """Why the judgement may not be revised now, or "" when it may."""
    if judgement.pk not in {j.pk for j in recent}:
        return f"Only your last {REVISABLE_LAST} judgements in a campaign can be revised; this one is older."
    return judgement_frozen_reason(judgement)


@role_required(*LABELERS)
def revise_last(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The labeling screen's "revise your last judgement" (key p): the revise page of the
    annotator's latest judgement in the campaign."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    last = judgement_last_id(annotator=request.user, campaign_id=campaign.id)
    if last is None:
        message = f"You have not judged anything in campaign {campaign.name!r} yet: there is nothing to revise."
        return render(request, "annotate/error.html", {"message": message}, status=404)
    return redirect("annotate:judgement-revise", judgement_id=last)


@role_required(*LABELERS)
def judgement_revise_page(request: HttpRequest, judgement_id: int) -> HttpResponse:
    """Go back to one of the annotator's last judgements: the comparison with the same sides, the
    verdict as stored, changed and saved again (the change is recorded). Refused once a dataset
    snapshot holds it."""
    judgement = (
        Judgement.objects.select_related(
            "assignment",
            "comparison__campaign",
            "comparison__task",
            "comparison__trajectory_a",
            "comparison__trajectory_b",
        )
        .filter(pk=judgement_id, annotator=request.user)
        .first()
    )
    if judgement is None or judgement.assignment is None:
        message = "That judgement is not yours." if judgement is None else "This judgement has no sides to revise."
        return render(request, "annotate/error.html", {"message": message}, status=404)
    campaign = judgement.comparison.campaign
    align = _align(request.GET)
    recent = judgements_recent(annotator=request.user, campaign_id=campaign.id)
    if request.method != "POST":
        reason = _revisable(judgement, recent)
        context = revise_context(judgement=judgement, recent=recent, error=reason, align=align)
        return render(request, "annotate/revise.html", {**context, "locked": bool(reason)})
    sent = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
    form = JudgementForm(request.POST, dimensions=dimensions_of(campaign))
    status, error = 400, ""
    if not form.is_valid():
        error = " ".join(e for errors in form.errors.values() for e in errors)
    else:
        try:
            _, revision = judgement_revise(judgement_id=judgement.pk, annotator=request.user, verdict=form.verdict)
        except JudgementFrozen as exc:
            status, error = 409, exc.message
        except ArbiterError as exc:
            error = exc.message
        else:
            words = dict((value, text) for value, text, _ in SCREEN_SCALE)[form.verdict.choice]
            if revision is None:
                messages.info(request, f"Nothing changed: your judgement still says “{words}”.")
            else:
                messages.success(request, f"Your judgement was revised: it now says “{words}”.")
            return redirect(_label_url(campaign, align))
    context = revise_context(judgement=judgement, recent=recent, sent=sent, error=error, align=align)
    return render(request, "annotate/revise.html", {**context, "locked": status == 409}, status=status)


@role_required(*READERS)
def quality(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Agreement, per-annotator figures and charts for one campaign."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    q = campaign_quality(campaign=campaign)
    q.annotators = [
        replace(a, username=annotator_label(request.user, a.annotator_id, a.username)) for a in q.annotators
    ]
    charts = {
        "votes": bar_chart_svg(
            [d for d, _ in q.votes_per_day], [n for _, n in q.votes_per_day], title="Judgements per day"
        ),
        "seconds": histogram_svg(q.seconds, title="Seconds per comparison", bins=12, unit="s"),
        "agreement": bar_chart_svg(
            [a.username for a in q.annotators],
            [a.majority_agreement or 0 for a in q.annotators],
            title="Agreement with the majority of the others",
            max_value=1,
            unit="%",
        ),
    }
    panels = campaign_judge_panels(campaign=campaign)
    charts["judges"] = interval_chart_svg(_judge_chart_rows(panels), title="Agreement with the human majority")
    return render(
        request,
        "annotate/quality.html",
        {"campaign": campaign, "q": q, "charts": charts, "panels": panels, "ordering_choices": ORDERINGS},
    )


def _judge_chart_rows(panels) -> list[tuple]:
    """Each judge's accuracy against the human majority, then people's own ceiling on the same
    comparisons, with their intervals (the overall verdict)."""
    rows = []
    for panel in panels:
        overall = panel.dimensions[0] if panel.dimensions else None
        if overall is None:
            continue
        for label, figures in (
            (panel.name, overall["vs_humans"]),
            (f"people ({panel.name}'s set)", overall["ceiling"]),
        ):
            accuracy = figures["accuracy"]
            rows.append((label, accuracy["value"], accuracy["low"], accuracy["high"]))
    return rows


@role_required(Role.ADMIN)
def campaign_order_post(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Order the queue disagreement-first (or back to plain order), from the quality page."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if request.method != "POST":
        return redirect("annotate:quality", campaign_id=campaign.pk)
    try:
        ordered = campaign_order(campaign=campaign, ordering=request.POST.get("ordering", ""))
    except ArbiterError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Ordered {ordered} open comparisons ({request.POST['ordering']}).")
    return redirect("annotate:quality", campaign_id=campaign.pk)


@role_required(*READERS)
def disagreements(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    rows = comparisons_in_disagreement(campaign=campaign).order_by(
        F("adjudicated_choice").asc(nulls_first=True), "-n_votes", "id"
    )
    return render(request, "annotate/disagreements.html", {"campaign": campaign, "comparisons": rows})


@role_required(*READERS)
def comparison_votes(request: HttpRequest, comparison_id: int) -> HttpResponse:
    """The votes on one comparison, side by side with the trajectories (A left, B right)."""
    comparison = get_object_or_404(
        Comparison.objects.select_related("campaign", "task", "trajectory_a", "trajectory_b", "adjudicated_by"),
        pk=comparison_id,
    )
    form = AdjudicateForm(request.POST or None)
    if request.method == "POST":
        if not user_has_role(request.user, Role.ADMIN):
            raise PermissionDenied("Only admins record adjudicated labels; researchers may read the votes.")
        if form.is_valid():
            comparison_adjudicate(
                comparison=comparison,
                admin=request.user,
                choice=form.cleaned_data["choice"],
                note=form.cleaned_data["note"],
            )
            messages.success(request, "Adjudicated label recorded.")
            return redirect(reverse("annotate:comparison-votes", args=[comparison.id]))
    votes = Judgement.objects.filter(comparison=comparison).select_related("annotator", "assignment").order_by("id")
    return render(
        request,
        "annotate/comparison_votes.html",
        {
            "comparison": comparison,
            "votes": votes,
            "form": form,
            "pair": pair_view(comparison.trajectory_a.steps, comparison.trajectory_b.steps),
            # The current ruling, if any; never a default the adjudicator did not choose.
            "picked": None if form.is_bound else comparison.adjudicated_choice,
            "scale": [(1, "A much better"), (2, "A better"), (3, "Tie"), (4, "B better"), (5, "B much better")],
        },
        status=400 if form.errors else 200,
    )
