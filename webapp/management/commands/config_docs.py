"""Write (or check) docs/config-options.md, the option tables generated from the configs' field metadata."""
from django.core.management.base import BaseCommand, CommandError

from webapp.runs.config_docs import DOCS_FILE, config_docs


class Command(BaseCommand):
    help = "Write docs/config-options.md from the config dataclasses (--check: fail when it is out of date)."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="only check that the file is current")

    def handle(self, *args, check: bool, **options):
        text = config_docs()
        if check:
            if not DOCS_FILE.exists() or DOCS_FILE.read_text() != text:
                raise CommandError(f"{DOCS_FILE} is out of date: run `python manage.py config_docs`.")
            self.stdout.write(f"{DOCS_FILE} is current.")
            return
        DOCS_FILE.write_text(text)
        self.stdout.write(self.style.SUCCESS(f"Wrote {DOCS_FILE}."))
