"""What the annotate app adds to the project's registries once Django is ready (apps.py): the
pickers of the run forms (policies, snapshots, campaigns) and its jobs for the stale-job sweep."""

from __future__ import annotations

from django.conf import settings

from annotate.models import Campaign, CampaignFill, CorrectionReplay, DatasetSnapshot, ImportBatch, Policy
from annotate.services.campaign_fill import FILL_STALE_REASON
from annotate.services.datasets import SNAPSHOT_STALE_REASON
from annotate.services.imports import IMPORT_STALE_REASON
from webapp.jobs import JobKind, job_kind_register
from webapp.runs.forms import picker_register


def _policies():
    return [(p.pk, str(p)) for p in Policy.objects.exclude(model_dir="").order_by("-created_at")[:300]]


def _snapshots():
    return [(s.pk, str(s)) for s in DatasetSnapshot.objects.filter(status="succeeded").order_by("-created_at")[:300]]


def _campaigns():
    return [(c.pk, c.name) for c in Campaign.objects.order_by("-created_at")[:300]]


def _setting(name: str):
    """The setting read when the sweep runs, so a test's or a deployment's override counts."""
    return lambda: getattr(settings, name)


def register() -> None:
    picker_register(r"(^|_)policy_ids$", _policies, several=True)
    picker_register(r"(^|_)policy_id$", _policies)
    picker_register(r"(^|_)snapshot_id$", _snapshots)
    picker_register(r"(^|_)campaign_ids$", _campaigns, several=True)
    picker_register(r"(^|_)campaign_id$", _campaigns)

    # Imports, dataset builds, fills and replays are jobs: the scheduled sweep fails the ones whose worker died.
    for model, stale_setting, reason in (
        (ImportBatch, "IMPORT_STALE_SECONDS", IMPORT_STALE_REASON),
        (DatasetSnapshot, "SNAPSHOT_STALE_SECONDS", SNAPSHOT_STALE_REASON),
        (CampaignFill, "FILL_STALE_SECONDS", FILL_STALE_REASON),
    ):
        job_kind_register(
            JobKind(model, stale_seconds=_setting(stale_setting), reason=reason, reason_fields=("error", "message"))
        )
    job_kind_register(
        JobKind(
            CorrectionReplay,
            stale_seconds=_setting("IMPORT_STALE_SECONDS"),
            reason="Its worker stopped while playing it; the correction stays as edited.",
        )
    )
