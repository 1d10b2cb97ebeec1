"""The card a download will carry, shown on the snapshot's page before anyone downloads: the card
(annotate/export_card.py) with the row counts of each split and, where the rows are few enough,
the length counts of the rows themselves (annotate/exports.py writes them)."""

from __future__ import annotations

from annotate.export_card import dataset_card, preview_rows
from annotate.export_lengths import PREVIEW_MAX_ROWS, TRL_LONG_ROWS, length_counts, snapshot_tokenizer
from annotate.exports import iter_rows
from annotate.models import DatasetSnapshot


def dataset_card_preview(snapshot: DatasetSnapshot, fmt: str) -> tuple[str, str]:
    """The card a `fmt` Parquet download carries, as (YAML metadata, Markdown body), for the snapshot's
    page; rows per split from `preview_rows`, and the length counts where the rows are few enough."""
    pairs = preview_rows(snapshot, fmt)
    lengths = None
    if fmt in TRL_LONG_ROWS and sum(pairs.values()) <= PREVIEW_MAX_ROWS:
        lengths = length_counts(iter_rows(snapshot, fmt), fmt, snapshot_tokenizer(snapshot), limit=PREVIEW_MAX_ROWS)
    card = dataset_card(snapshot, fmt, "parquet", {split: n for split, n in pairs.items() if n}, lengths)
    _, meta, body = card.split("---\n", 2)
    return meta, body
