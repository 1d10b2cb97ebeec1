"""Export a frozen snapshot.

    python manage.py export_dataset SNAPSHOT_ID --format trl|trl_text|kto|raw|steps --out PATH

PATH ending in .jsonl or .parquet: one data file with both splits (a `split` column).
PATH ending in .zip: the bundle (README.md dataset card, manifest.json with sha256 sums,
data/train.* and data/test.*), the file type from --filetype. Any other PATH: the same
bundle as a folder.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.export_schemas import FILETYPES, FORMATS
from annotate.exports import export_bundle_dir, export_file, export_zip
from annotate.models import DatasetSnapshot
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Export a dataset snapshot as JSONL or Parquet (a file, a .zip bundle, or a bundle folder)."

    def add_arguments(self, parser):
        parser.add_argument("snapshot_id", type=int)
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("--out", required=True, type=Path)
        parser.add_argument("--filetype", choices=FILETYPES, default="parquet", help="inside a bundle")

    def handle(self, *args, snapshot_id: int, fmt: str, out: Path, filetype: str, **options):
        snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id).first()
        if snapshot is None:
            raise CommandError(f"No snapshot with id {snapshot_id}.")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.suffix in (".jsonl", ".parquet"):
                n = export_file(snapshot, fmt, out)
                self.stdout.write(self.style.SUCCESS(f"Wrote {n} rows to {out}."))
            elif out.suffix == ".zip":
                export_zip(snapshot, fmt, filetype, out)
                self.stdout.write(self.style.SUCCESS(f"Wrote the {fmt} bundle ({filetype}) to {out}."))
            elif out.suffix:
                raise CommandError(f"{out}: use .jsonl, .parquet, .zip, or a folder.")
            else:
                files = export_bundle_dir(snapshot, fmt, filetype, out)
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Wrote the {fmt} bundle to {out}/ ({', '.join(f'{s}: {n} rows' for s, n in files.items())})."
                    )
                )
        except ArbiterError as exc:
            raise CommandError(exc.message) from None
