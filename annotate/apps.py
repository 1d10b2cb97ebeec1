from django.apps import AppConfig


def _policies():
    from annotate.models import Policy

    return [(p.pk, str(p)) for p in Policy.objects.exclude(model_dir="").order_by("-created_at")[:300]]


def _snapshots():
    from annotate.models import DatasetSnapshot

    return [(s.pk, str(s)) for s in DatasetSnapshot.objects.filter(status="succeeded").order_by("-created_at")[:300]]


def _campaigns():
    from annotate.models import Campaign

    return [(c.pk, c.name) for c in Campaign.objects.order_by("-created_at")[:300]]


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Annotation"

    def ready(self) -> None:
        # Imports and dataset builds are jobs: the scheduled sweep fails the ones whose worker died.
        from django.conf import settings

        from annotate.models import CampaignFill, CorrectionReplay, DatasetSnapshot, ImportBatch
        from annotate.services.campaign_fill import FILL_STALE_REASON
        from annotate.services.datasets import SNAPSHOT_STALE_REASON
        from annotate.services.imports import IMPORT_STALE_REASON
        from webapp.jobs import JobKind, job_kind_register
        from webapp.runs.forms import picker_register

        picker_register(r"(^|_)policy_ids$", _policies, several=True)
        picker_register(r"(^|_)policy_id$", _policies)
        picker_register(r"(^|_)snapshot_id$", _snapshots)
        picker_register(r"(^|_)campaign_ids$", _campaigns, several=True)
        picker_register(r"(^|_)campaign_id$", _campaigns)

        job_kind_register(
            JobKind(
                ImportBatch,
                stale_seconds=lambda: settings.IMPORT_STALE_SECONDS,
                reason=IMPORT_STALE_REASON,
                reason_fields=("error", "message"),
            )
        )
        job_kind_register(
            JobKind(
                DatasetSnapshot,
                stale_seconds=lambda: settings.SNAPSHOT_STALE_SECONDS,
                reason=SNAPSHOT_STALE_REASON,
                reason_fields=("error", "message"),
            )
        )
        job_kind_register(
            JobKind(
                CampaignFill,
                stale_seconds=lambda: settings.FILL_STALE_SECONDS,
                reason=FILL_STALE_REASON,
                reason_fields=("error", "message"),
            )
        )
        job_kind_register(
            JobKind(
                CorrectionReplay,
                stale_seconds=lambda: settings.IMPORT_STALE_SECONDS,
                reason="Its worker stopped while playing it; the correction stays as edited.",
            )
        )
