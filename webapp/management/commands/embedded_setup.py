"""`make run`'s set-up before its servers start, in one process: the database migrations, the
static files and, for the embedded database and broker, the jobs cut off by the last stop.

    python manage.py embedded_setup [--orphaned] --log var/start.log

Each step was its own `manage.py` call before, and each call paid Django's start (about 1.5 s
idle, several times that on a busy machine) again. Each step's name is printed on stdout as
it starts (scripts/run_embedded.sh prefixes it with the seconds since the start); what the
steps themselves say goes to the log. A failing step stops the command with status 1.
"""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Migrate, collect the static files and fail orphaned jobs, in one process (make run)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--orphaned",
            action="store_true",
            help="also fail every job left running (only when no worker runs on this database)",
        )
        parser.add_argument("--log", required=True, help="file the steps' own output is appended to")

    def handle(self, *args, orphaned: bool, log: str, **options):
        steps = [
            ("database migrations", "migrate", {"interactive": False}),
            ("static files", "collectstatic", {"interactive": False}),
        ]
        if orphaned:
            steps.append(("jobs cut off by the last stop", "jobs_sweep", {"orphaned": True}))
        with open(log, "a", encoding="utf-8") as out:
            for what, command, arguments in steps:
                self.stdout.write(f"{what} ...")
                self.stdout.flush()
                try:
                    call_command(command, verbosity=0, stdout=out, stderr=out, **arguments)
                except Exception as exc:  # the step's own error, named, for the launcher to show
                    out.write(f"{command} failed: {exc!r}\n")
                    raise CommandError(f"{what} failed: {exc}") from exc
