"""Pages of the annotation app (HTML and HTMX fragments)."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotate.forms import ImportUploadForm
from annotate.models import ImportBatch
from annotate.selectors import import_batches_recent
from annotate.services.imports import import_batches_fail_stale, import_upload_create
from webapp.access import role_required
from webapp.errors import ArbiterError
from webapp.roles import Role


@role_required(Role.ADMIN)
def imports(request: HttpRequest) -> HttpResponse:
    """Upload a JSONL file of trajectories and follow earlier imports."""
    form = ImportUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            batch = import_upload_create(
                upload=form.cleaned_data["file"],
                campaign=form.cleaned_data["campaign"],
                created_by=request.user,
            )
        except ArbiterError as exc:
            form.add_error("file", exc.message)
        else:
            if not batch.finished:
                messages.info(request, f"{batch.filename} is large: it is being imported by a job.")
            return redirect("annotate:import-detail", batch_id=batch.id)
    import_batches_fail_stale()
    status = 400 if form.errors else 200
    return render(
        request, "annotate/imports.html", {"form": form, "batches": import_batches_recent()}, status=status
    )


@role_required(Role.ADMIN)
def import_detail(request: HttpRequest, batch_id: int) -> HttpResponse:
    """One import; while it runs, the status fragment polls itself and stops when done."""
    import_batches_fail_stale()
    batch = get_object_or_404(ImportBatch.objects.select_related("campaign"), pk=batch_id)
    if request.htmx:
        response = render(request, "annotate/import_detail.html#import-status", {"batch": batch})
        if batch.finished:
            response.status_code = 286  # htmx: stop polling
        return response
    return render(request, "annotate/import_detail.html", {"batch": batch})
