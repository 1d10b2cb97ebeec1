"""Write (or check) the generated docs: docs/config-options.md, the kinds' table of docs/runs.md and
the model table of docs/data-model.md."""

from django.core.management.base import BaseCommand, CommandError

from arbiter.generated_docs import DATA_MODEL_FILE, DOCS_FILE, RUNS_FILE, config_docs, data_model_doc, runs_doc


class Command(BaseCommand):
    help = "Write the generated docs (option tables, kinds, model table); --check: fail when one is out of date."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="only check that the files are current")

    def handle(self, *args, check: bool, **options):
        model_doc = DATA_MODEL_FILE.read_text()
        wanted = {
            DOCS_FILE: config_docs(),
            DATA_MODEL_FILE: data_model_doc(model_doc),
            RUNS_FILE: runs_doc(RUNS_FILE.read_text()),
        }
        if check:
            stale = [str(path) for path, text in wanted.items() if not path.exists() or path.read_text() != text]
            if stale:
                raise CommandError(f"out of date: {', '.join(stale)}; run `python manage.py generate_docs`.")
            self.stdout.write("The generated docs are current.")
            return
        for path, text in wanted.items():
            path.write_text(text)
        self.stdout.write(self.style.SUCCESS(f"Wrote {', '.join(str(p) for p in wanted)}."))
