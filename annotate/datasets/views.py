"""Dataset snapshot pages: list and create, follow a build, download (researchers and admins)."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotate.datasets.forms import SnapshotForm
from annotate.export_card import empty_exports
from annotate.export_labels import labelled_by_counts, labelled_by_sentence
from annotate.export_preview import dataset_card_preview
from annotate.export_schemas import FILETYPES, FORMATS
from annotate.exports import export_download_path
from annotate.models import DatasetSnapshot
from annotate.preferences import MIN_TEST_PAIRS, MIN_TRAIN_PAIRS, can_train_reward_model, reward_model_pairs
from annotate.services.datasets import snapshot_create_from_input
from webapp.access import role_required
from webapp.errors import ArbiterError
from webapp.roles import Role

DATA_ROLES = (Role.RESEARCHER, Role.ADMIN)


@role_required(*DATA_ROLES)
def datasets(request: HttpRequest) -> HttpResponse:
    form = SnapshotForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            snapshot = snapshot_create_from_input(
                data=form.cleaned_data, campaigns=list(form.cleaned_data["campaigns"]), created_by=request.user
            )
        except ArbiterError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("annotate:dataset", snapshot_id=snapshot.id)
    snapshots = DatasetSnapshot.objects.prefetch_related("campaigns").order_by("-created_at")[:100]
    return render(
        request, "annotate/datasets.html", {"form": form, "snapshots": snapshots}, status=400 if form.errors else 200
    )


@role_required(*DATA_ROLES)
def dataset(request: HttpRequest, snapshot_id: int) -> HttpResponse:
    snapshot = get_object_or_404(DatasetSnapshot.objects.prefetch_related("campaigns"), pk=snapshot_id)
    context = {"snapshot": snapshot, "formats": FORMATS, "filetypes": FILETYPES}
    card_format = request.GET.get("card") if request.GET.get("card") in FORMATS else "trl"
    if snapshot.status == DatasetSnapshot.Status.SUCCEEDED:
        context["card_format"] = card_format
        context["card_meta"], context["card_body"] = dataset_card_preview(snapshot, card_format)
        context["empty_formats"] = empty_exports(snapshot)
        context["labelled_by"] = labelled_by_sentence(labelled_by_counts(snapshot, "trl"), "pairs")
        train, test = reward_model_pairs(snapshot.stats)
        context["reward_model_pairs"] = {
            "train": train,
            "test": test,
            "enough": can_train_reward_model((train, test)),
            "min_train": MIN_TRAIN_PAIRS,
            "min_test": MIN_TEST_PAIRS,
        }
    if request.htmx:
        response = render(request, "annotate/dataset.html#snapshot-status", context)
        if snapshot.finished:
            response.status_code = 286  # htmx: stop polling
        return response
    return render(request, "annotate/dataset.html", context)


@role_required(*DATA_ROLES)
def dataset_download(request: HttpRequest, snapshot_id: int) -> HttpResponse:
    snapshot = get_object_or_404(DatasetSnapshot, pk=snapshot_id)
    fmt, filetype = request.GET.get("format", "trl"), request.GET.get("filetype", "parquet")
    try:
        path = export_download_path(snapshot, fmt, filetype)
    except ArbiterError as exc:
        return render(request, "annotate/error.html", {"message": exc.message}, status=400)
    return FileResponse(
        path.open("rb"), as_attachment=True, filename=f"arbiter-snapshot-{snapshot.pk}-{fmt}-{filetype}.zip"
    )
