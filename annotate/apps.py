from django.apps import AppConfig


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
