from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_roles(sender, **kwargs) -> None:
    from webapp.roles import roles_sync

    roles_sync()


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Arbiter core"

    def ready(self) -> None:
        from django.urls import register_converter

        from webapp.converters import IdConverter

        register_converter(IdConverter, "id")

        from django.conf import settings

        from webapp.jobs import JobKind, job_kind_register
        from webapp.models import Run
        from webapp.runs.services import runs_sweep_stale

        job_kind_register(JobKind(Run, stale_seconds=lambda: settings.RUN_STALE_SECONDS, sweep=runs_sweep_stale))
        # Once per migrate run: after the last app's permissions exist.
        post_migrate.connect(_sync_roles, dispatch_uid="webapp.roles_sync")
