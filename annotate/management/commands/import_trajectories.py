"""Import a JSONL file of trajectories or agent traces, all or nothing.

    python manage.py import_trajectories FILE.jsonl [--campaign NAME] [--format FORMAT]

Formats (docs/formats/): a trajectory per line as canonical v1, OpenAI chat or Anthropic
Messages; or a trace export: OpenTelemetry GenAI spans (otel), OpenInference spans,
LangSmith runs, Langfuse traces. --format (default auto: detected from the content) reads
the whole file as that format.

With --campaign, comparisons are built from the imported trajectories in that campaign
(created with default settings if it does not exist). A refused file changes nothing at
all: not even the campaign is created.
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.input_records import error_place
from annotate.services.campaigns import campaign_get_or_create
from annotate.services.imports import trajectories_import_stream
from annotate.trace_formats.reading import IMPORT_FORMATS
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Import trajectories from a JSONL file (one per line); a file with a bad line imports nothing."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--campaign", help="build comparisons in this campaign (created if missing)")
        parser.add_argument(
            "--format",
            choices=IMPORT_FORMATS,
            default="auto",
            help="read the file as this format (default: detect it from the content)",
        )
        parser.add_argument(
            "--partial-traces",
            action="store_true",
            help="import traces whose records name a parent missing from the file, marked partial "
            "(default: such a file is refused, naming the trace and the record)",
        )

    def handle(
        self, *args, file: Path, campaign: str | None, format: str = "auto", partial_traces: bool = False, **options
    ):
        if not file.is_file():
            raise CommandError(f"{file}: no such file")
        size = file.stat().st_size
        if size > settings.IMPORT_MAX_UPLOAD_BYTES:
            raise CommandError(
                f"{file} is {size:,} bytes, over the limit of {settings.IMPORT_MAX_UPLOAD_BYTES:,} "
                "(IMPORT_MAX_UPLOAD_BYTES)"
            )
        created = False
        try:
            with transaction.atomic(), file.open("rb") as stream:
                target = None
                if campaign:
                    target, created = campaign_get_or_create(name=campaign)
                report = trajectories_import_stream(
                    stream=stream, campaign=target, format=format, partial_traces=partial_traces
                )
        except ArbiterError as exc:
            for detail in exc.details:
                self.stderr.write(f"{error_place(detail)}: {detail['error']}")
            raise CommandError(exc.message) from None
        if created:
            self.stdout.write(f"Created campaign {target.name!r} (id {target.id}).")
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {report.created} trajectories from {report.lines_read} "
                f"{'records of one JSON document' if report.layout == 'document' else 'lines'} "
                f"({report.duplicates} already stored)"
                + (f"; {report.comparisons_created} comparisons built in {campaign!r}." if campaign else ".")
            )
        )
        if report.dropped:
            self.stdout.write(report.dropped_note().strip())
