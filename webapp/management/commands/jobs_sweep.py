"""Fail the background jobs (runs, imports, dataset builds) whose worker is gone.

    python manage.py jobs_sweep              # what Celery beat does every JOB_SWEEP_SECONDS
    python manage.py jobs_sweep --orphaned   # every running job: only when no worker runs

`make run` (scripts/run_embedded.sh) calls it with --orphaned before it starts its own
worker: a job still marked running then was cut off when the last `make run` stopped, and
failing it now lets `load_demo` start the default policy's training again at once, instead
of waiting for the scheduled sweep to notice the silence.
"""

from django.core.management.base import BaseCommand

from webapp.jobs import jobs_sweep_stale


class Command(BaseCommand):
    help = "Fail running jobs whose worker stopped sending heartbeats (or every running job, with --orphaned)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--orphaned", action="store_true", help="fail every running job: use only when no worker is running"
        )

    def handle(self, *args, orphaned: bool, **options):
        counts = jobs_sweep_stale(older_than=0 if orphaned else None)
        for label, count in counts.items():
            if count:
                self.stdout.write(f"Failed {count} {label} job(s) left running by a stopped worker.")
