"""Corrections in the app: the list by status (researchers and admins) and one correction beside
what it fixes, with its lineage and the rubric's outcome, accepted or rejected by admins."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotate.models import Correction
from annotate.services.corrections import correction_review, replay_words
from annotate.trajectory_view import pair_view
from webapp.access import role_required
from webapp.errors import ArbiterError
from webapp.roles import Role, user_has_role

READERS = (Role.RESEARCHER, Role.ADMIN)


@role_required(*READERS)
def corrections(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", Correction.Status.PENDING)
    if status not in (*Correction.Status.values, "all"):
        status = Correction.Status.PENDING
    rows = Correction.objects.select_related("original__task", "corrected", "comparison__campaign", "author", "replay")
    if status != "all":
        rows = rows.filter(status=status)
    shown = list(rows.order_by("id")[:500])
    for row in shown:
        row.how = replay_words(row)
    return render(
        request,
        "annotate/corrections.html",
        {"corrections": shown, "status": status, "statuses": [*Correction.Status.values, "all"]},
    )


@role_required(*READERS)
def correction(request: HttpRequest, correction_id: int) -> HttpResponse:
    row = get_object_or_404(
        Correction.objects.select_related(
            "original__task", "corrected", "comparison__campaign", "author", "reviewed_by", "replay"
        ),
        pk=correction_id,
    )
    if request.method == "POST":
        if not user_has_role(request.user, Role.ADMIN):
            raise PermissionDenied("Only admins review corrections; researchers may read them.")
        try:
            correction_review(
                correction=row,
                decision=request.POST.get("decision", ""),
                reviewer=request.user,
                note=request.POST.get("note", ""),
            )
        except ArbiterError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Correction #{row.pk} {request.POST['decision']}ed.")
            following = (
                Correction.objects.filter(status=Correction.Status.PENDING, pk__gt=row.pk).order_by("id").first()
            )
            if following is not None:  # on to the next one to review
                return redirect("annotate:correction", correction_id=following.pk)
        return redirect("annotate:correction", correction_id=row.pk)
    return render(
        request,
        "annotate/correction.html",
        {"correction": row, "pair": pair_view(row.original.steps, row.corrected.steps), "how": replay_words(row)},
    )
