"""What the core app adds to the project's registries once Django is ready (apps.py): runs as jobs
for the stale-job sweep, every worker's beat, and the roles' groups kept in step after each migrate."""

from __future__ import annotations

from django.conf import settings
from django.db.models.signals import post_migrate

from webapp.jobs import JobKind, job_kind_register
from webapp.models import Run
from webapp.roles import roles_sync
from webapp.runs.services import runs_sweep_stale
from webapp.workers import connect_worker_signals


def _sync_roles(sender, **kwargs) -> None:
    roles_sync()


def register() -> None:
    job_kind_register(JobKind(Run, stale_seconds=lambda: settings.RUN_STALE_SECONDS, sweep=runs_sweep_stale))
    # Once per migrate run: after the last app's permissions exist.
    post_migrate.connect(_sync_roles, dispatch_uid="webapp.roles_sync")
    # Each worker beats a row, so pages can tell when none is alive.
    connect_worker_signals()
