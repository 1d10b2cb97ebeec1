"""Exports of a frozen snapshot: `trl`, `trl_text`, `kto`, `raw` and `steps`, as JSONL or Parquet.

Rows are streamed from the database in a fixed order and written in batches, so memory
does not grow with the snapshot, and the same snapshot always gives byte-identical files.

- `trl`: `prompt`, `chosen`, `rejected` as chat messages (tool calls stay structured:
  assistant messages with `tool_calls`, `tool` messages for results; the prompt starts
  with a `system` message when the agent had a system prompt), `tools` (the JSON schemas
  the agent was given, as JSON text; "null" when none), plus `margin`, `comparison_id`,
  `task_id`, `votes`, `preferred`, `split`. Loads with `datasets` and trains with TRL's
  `RewardTrainer` as it is. Ties are never rows: TRL trains every row as "chosen beats
  rejected", so a tie written as a pair (margin 0) would be taught as a preference. A
  snapshot's kept ties stay in the snapshot (Arbiter's own reward model drops them too) and
  their judgements in `raw`; the card says how many were left out.
- `trl_text`: the same with plain-text transcripts, for models without a chat template.
- `kto`: unpaired `prompt`, `completion` (chat messages), `label` (desirable or not),
  `tools`, for TRL's `KTOTrainer`; the rule that turns judgements into labels is
  `kto_labels`.
- `raw`: one row per judgement: pseudonymous annotator, the side shown left, the choice
  in A/B terms, ratings (a list of {dimension, side, value}, one typed column whatever the
  campaigns' dimensions), first wrong steps, rationale, seconds, synthetic, time.
- `steps`: the stepwise-supervision form for process reward models: for each judged
  side with a first wrong step, `prompt`, `completions` (the steps up to and including
  the first wrong one, as text) and `labels` (true for each good step, false for it).
- `sft`: whole conversations to imitate: people's accepted corrections (`origin`
  correction), then the chosen side of each pair that is not a tie and that not every vote
  called both bad (`origin` chosen).
- `dpo`: each accepted correction against the trajectory it corrects, then the pairs.

Every row of every format says who labelled it in `labelled_by` (people, simulated, mixed
or judge: annotate/export_labels.py); the pair formats mark with `both_bad` a pair every vote
called both bad. The card counts both, and the rows over TRL's default `max_length`
(annotate/export_lengths.py).

`tools` is JSON text rather than nested columns: every tool has its own parameter schema,
and Arrow (Parquet, and `datasets` reading JSONL) would merge them into one struct, adding
every other tool's parameters as nulls. TRL's trainers read a string `tools` column with
`json.loads` before passing it to the chat template; "null" (JSON null) when the agent
had no tools, so the template sees None, as without the column.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from datetime import timezone as dt_timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection

from annotate.chat_messages import messages_to_text, openai_tools, prompt_messages, steps_to_messages
from annotate.export_card import dataset_card
from annotate.export_copy import RawCopyBatches
from annotate.export_labels import judgement_labelled_by, pair_both_bad, pair_labelled_by
from annotate.export_lengths import TRL_LONG_ROWS, count_stride, length_counts, snapshot_tokenizer
from annotate.export_schemas import FILETYPES, FORMATS, SCHEMAS, TIME_FORMAT, features_of, rating_rows
from annotate.models import DatasetSnapshot, SnapshotCorrection, SnapshotJudgement, SnapshotPair
from webapp.errors import ArbiterError
from webapp.models import User, pseudonym_for

BATCH = 2000


def _require_ready(snapshot: DatasetSnapshot) -> None:
    if snapshot.status in DatasetSnapshot.ACTIVE:
        raise ArbiterError(
            f"Snapshot {snapshot.pk} is still building ({snapshot.progress:.0%}); try again when it is ready."
        )
    if snapshot.status != DatasetSnapshot.Status.SUCCEEDED:
        raise ArbiterError(f"Snapshot {snapshot.pk} failed to build and has nothing to export: {snapshot.message}")


def _check(fmt: str, filetype: str | None = None) -> None:
    if fmt not in FORMATS:
        raise ArbiterError(f"Unknown format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if filetype is not None and filetype not in FILETYPES:
        raise ArbiterError(f"Unknown file type {filetype!r}; choose jsonl or parquet.")


def _pseudonyms() -> dict[int, str]:
    return {pk: pseudonym_for(pk) for pk in User.objects.values_list("id", flat=True)}


def _step_text(step: dict) -> str:
    kind = step.get("kind")
    if kind == "action":
        arguments = step.get("arguments", {})
        arguments = (
            arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        )
        return f"{step.get('tool', '')}[{arguments}]"
    if kind == "observation":
        return f"Observation ({step.get('tool') or 'result'}): {step.get('content', '')}"
    return step.get("text", "")


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _tools_json(tools) -> str:
    """The agent's tool schemas as JSON text in the OpenAI function form (`openai_tools`; the
    stored form stays as imported), the string form TRL's trainers `json.loads`; "null" when it
    had none.

    Always a string, never a missing value: `datasets` infers a JSONL column that is null in
    every row of a file as type null, and then refuses to load that split beside one with tools.
    """
    return json.dumps(openai_tools(tools), ensure_ascii=False, separators=(",", ":"))


def kto_labels(*, choice: int, both_bad: bool) -> dict[str, bool]:
    """The KTO labels one judgement gives its sides, {side: desirable}; see KTO_RULE."""
    if both_bad:
        return {"A": False, "B": False}
    if choice == 3:
        return {}
    winner, loser = ("A", "B") if choice < 3 else ("B", "A")
    return {winner: True, loser: False} if choice in (1, 5) else {winner: True}


def _kto_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    names = _pseudonyms()
    members = SnapshotJudgement.objects.filter(snapshot=snapshot).order_by("judgement_id")
    if split:
        members = members.filter(split=split)
    # Ties that are not both bad give no row: leave them in the database.
    members = members.exclude(judgement__choice=3, judgement__both_bad=False)
    for r in members.values_list(
        "judgement_id",
        "judgement__comparison_id",
        "task_external_id",
        "judgement__comparison__task__prompt",
        "judgement__annotator_id",
        "judgement__choice",
        "judgement__both_bad",
        "judgement__synthetic",
        "judgement__comparison__trajectory_a_id",
        "judgement__comparison__trajectory_a__steps",
        "judgement__comparison__trajectory_a__metadata__system_prompt",
        "judgement__comparison__trajectory_a__metadata__tools",
        "judgement__comparison__trajectory_b_id",
        "judgement__comparison__trajectory_b__steps",
        "judgement__comparison__trajectory_b__metadata__system_prompt",
        "judgement__comparison__trajectory_b__metadata__tools",
        "split",
    ).iterator(chunk_size=BATCH):
        (
            jid,
            cid,
            task_id,
            prompt,
            annotator,
            choice,
            both_bad,
            synthetic,
            a_id,
            steps_a,
            system_a,
            tools_a,
            b_id,
            steps_b,
            system_b,
            tools_b,
            row_split,
        ) = r
        labels = kto_labels(choice=choice, both_bad=both_bad)
        sides = {"A": (a_id, steps_a, system_a, tools_a), "B": (b_id, steps_b, system_b, tools_b)}
        for side in ("A", "B"):
            if side not in labels:
                continue
            trajectory_id, steps, system, tools = sides[side]
            yield {
                "prompt": prompt_messages(prompt, _text_or_none(system)),
                "completion": steps_to_messages(steps),
                "label": labels[side],
                "tools": _tools_json(tools),
                "judgement_id": jid,
                "comparison_id": cid,
                "trajectory_id": trajectory_id,
                "task_id": task_id,
                "annotator": names[annotator],
                "side": side,
                "choice": choice,
                "both_bad": both_bad,
                "split": row_split,
                "labelled_by": judgement_labelled_by(synthetic),
            }


_CORRECTION_FIELDS = (
    "correction_id",
    "correction__original_id",
    "correction__corrected_id",
    "correction__original__task__external_id",
    "correction__original__task__prompt",
    "correction__kind",
    "correction__step",
    "correction__replayed",
    "correction__original__steps",
    "correction__corrected__steps",
    "correction__original__metadata__system_prompt",
    "correction__original__metadata__tools",
    "split",
)


def _corrections(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    members = SnapshotCorrection.objects.filter(snapshot=snapshot).order_by("correction_id")
    if split:
        members = members.filter(split=split)
    for values in members.values_list(*_CORRECTION_FIELDS).iterator(chunk_size=BATCH):
        yield dict(zip(_CORRECTION_FIELDS, values))


def _sft_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    """People's accepted corrections (`origin` correction), then the chosen side of every pair that
    is not a tie and not called both bad by every vote (`origin` chosen): an export to imitate even
    before a correction is accepted."""
    yield from _corrected_sft_rows(snapshot, split)
    yield from _chosen_sft_rows(snapshot, split)


def _chosen_sft_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie").order_by("comparison_id")
    if split:
        pairs = pairs.filter(split=split)
    pairs = pairs.annotate(labelled_by=pair_labelled_by(snapshot), both_bad=pair_both_bad(snapshot))
    sides = {
        side: (
            f"comparison__trajectory_{side}_id",
            f"comparison__trajectory_{side}__steps",
            f"comparison__trajectory_{side}__metadata__system_prompt",
            f"comparison__trajectory_{side}__metadata__tools",
        )
        for side in "ab"
    }
    for row in (
        pairs.filter(both_bad=False)
        .values_list("preferred", "task__external_id", "task__prompt", "split", "labelled_by", *sides["a"], *sides["b"])
        .iterator(chunk_size=BATCH)
    ):
        preferred, task_id, prompt, row_split, labelled_by = row[:5]
        trajectory, steps, system, tools = row[9:13] if preferred == "B" else row[5:9]
        yield {
            "messages": prompt_messages(prompt, _text_or_none(system)) + steps_to_messages(steps),
            "tools": _tools_json(tools),
            "correction_id": None,
            "original_id": None,
            "trajectory_id": trajectory,
            "task_id": task_id,
            "kind": None,
            "replayed": None,
            "split": row_split,
            "labelled_by": labelled_by,
            "origin": "chosen",
        }


def _corrected_sft_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    for c in _corrections(snapshot, split):
        yield {
            "messages": prompt_messages(
                c["correction__original__task__prompt"],
                _text_or_none(c["correction__original__metadata__system_prompt"]),
            )
            + steps_to_messages(c["correction__corrected__steps"]),
            "tools": _tools_json(c["correction__original__metadata__tools"]),
            "correction_id": c["correction_id"],
            "original_id": c["correction__original_id"],
            "trajectory_id": c["correction__corrected_id"],
            "task_id": c["correction__original__task__external_id"],
            "kind": c["correction__kind"],
            "replayed": c["correction__replayed"],
            "split": c["split"],
            "labelled_by": "people",
            "origin": "correction",
        }


def shared_prefix(original: list[dict], corrected: list[dict], step: int) -> tuple[list, list, list]:
    """(shared, chosen, rejected) messages of a correction: what both trajectories said before the
    correction's step, then each one's own continuation. A thought just before the step goes
    with the call it led to (one assistant message); where the two do not render the same up
    to there, nothing is shared."""
    cut = step
    while cut > 0 and isinstance(original[cut - 1], dict) and original[cut - 1].get("kind") == "thought":
        cut -= 1
    n = len(steps_to_messages(original[:cut]))
    theirs, ours = steps_to_messages(original), steps_to_messages(corrected)
    if theirs[:n] != ours[:n]:
        n = 0
    return theirs[:n], ours[n:], theirs[n:]


def _dpo_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    for c in _corrections(snapshot, split):
        shared, chosen, rejected = shared_prefix(
            c["correction__original__steps"], c["correction__corrected__steps"], c["correction__step"]
        )
        if not chosen or not rejected:  # nothing to prefer against: no row
            continue
        base = prompt_messages(
            c["correction__original__task__prompt"], _text_or_none(c["correction__original__metadata__system_prompt"])
        )
        yield {
            "prompt": base + shared,
            "chosen": chosen,
            "rejected": rejected,
            "tools": _tools_json(c["correction__original__metadata__tools"]),
            "source": "correction",
            "correction_id": c["correction_id"],
            "comparison_id": None,
            "task_id": c["correction__original__task__external_id"],
            "margin": 1.0,
            "split": c["split"],
            "labelled_by": "people",
            "both_bad": False,
        }
    for row in iter_rows(snapshot, "trl", split=split):
        if row["preferred"] == "tie":
            continue
        yield {
            "prompt": row["prompt"],
            "chosen": row["chosen"],
            "rejected": row["rejected"],
            "tools": row["tools"],
            "source": row["source"],
            "correction_id": None,
            "comparison_id": row["comparison_id"],
            "task_id": row["task_id"],
            "margin": row["margin"],
            "split": row["split"],
            "labelled_by": row["labelled_by"],
            "both_bad": row["both_bad"],
        }


def raw_queryset(snapshot: DatasetSnapshot, *, split: str | None = None):
    """The `raw` export's query: one row of values per judgement, in judgement order."""
    members = SnapshotJudgement.objects.filter(snapshot=snapshot).order_by("judgement_id")
    if split:
        members = members.filter(split=split)
    return members.values_list(
        "judgement_id",
        "judgement__comparison_id",
        "task_external_id",
        "judgement__annotator_id",
        "left_is_a",
        "judgement__choice",
        "judgement__both_bad",
        "judgement__ratings",
        "judgement__first_wrong_step_a",
        "judgement__first_wrong_step_b",
        "judgement__rationale",
        "judgement__seconds",
        "judgement__synthetic",
        "judgement__created_at",
        "split",
    )


def iter_rows(snapshot: DatasetSnapshot, fmt: str, *, split: str | None = None) -> Iterator[dict]:
    """The rows of one format, in a fixed order (comparison, then judgement id)."""
    _check(fmt)
    _require_ready(snapshot)
    if fmt in ("trl", "trl_text"):
        yield from _trl_rows(snapshot, split, text=fmt == "trl_text")
    else:
        yield from _ROWS[fmt](snapshot, split)


def _trl_rows(snapshot: DatasetSnapshot, split: str | None, *, text: bool) -> Iterator[dict]:
    """The pairs TRL's trainers take: conversations (`trl`) or their text (`trl_text`)."""
    # Ties are not preferences: TRL would train "chosen" over "rejected" (see the docstring).
    pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie").order_by("comparison_id")
    if split:
        pairs = pairs.filter(split=split)
    pairs = pairs.annotate(labelled_by=pair_labelled_by(snapshot), both_bad=pair_both_bad(snapshot))
    for p in pairs.values_list(
        "comparison_id",
        "preferred",
        "margin",
        "votes",
        "split",
        "source",
        "task__external_id",
        "task__prompt",
        "comparison__trajectory_a__steps",
        "comparison__trajectory_a__metadata__system_prompt",
        "comparison__trajectory_a__metadata__tools",
        "comparison__trajectory_b__steps",
        "comparison__trajectory_b__metadata__system_prompt",
        "comparison__trajectory_b__metadata__tools",
        "labelled_by",
        "both_bad",
    ).iterator(chunk_size=BATCH):
        (
            comparison_id,
            preferred,
            margin,
            votes,
            row_split,
            source,
            task_id,
            prompt,
            steps_a,
            system_a,
            tools_a,
            steps_b,
            system_b,
            tools_b,
            labelled_by,
            both_bad,
        ) = p
        # The prompt is shared, so it carries the chosen side's system prompt and tools (A for a tie):
        # the two sides of a comparison answer one task and are normally given the same ones.
        if preferred == "B":
            chosen, rejected, system, tools = steps_b, steps_a, system_b, tools_b
        else:
            chosen, rejected, system, tools = steps_a, steps_b, system_a, tools_a
        prompt_msgs = prompt_messages(prompt, _text_or_none(system))
        chosen_msgs, rejected_msgs = steps_to_messages(chosen), steps_to_messages(rejected)
        if text:
            yield {
                "prompt": messages_to_text(prompt_msgs),
                "chosen": messages_to_text(chosen_msgs),
                "rejected": messages_to_text(rejected_msgs),
                "margin": margin,
                "comparison_id": comparison_id,
                "task_id": task_id,
                "votes": votes,
                "preferred": preferred,
                "split": row_split,
                "source": source,
                "labelled_by": labelled_by,
                "both_bad": both_bad,
            }
        else:
            yield {
                "prompt": prompt_msgs,
                "chosen": chosen_msgs,
                "rejected": rejected_msgs,
                "tools": _tools_json(tools),
                "margin": margin,
                "comparison_id": comparison_id,
                "task_id": task_id,
                "votes": votes,
                "preferred": preferred,
                "split": row_split,
                "source": source,
                "labelled_by": labelled_by,
                "both_bad": both_bad,
            }


def _raw_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    """One row per judgement, as the annotator gave it."""
    names = _pseudonyms()
    for r in raw_queryset(snapshot, split=split).iterator(chunk_size=BATCH):
        (
            jid,
            cid,
            task_id,
            annotator,
            left_is_a,
            choice,
            both_bad,
            ratings,
            wrong_a,
            wrong_b,
            rationale,
            seconds,
            synthetic,
            created_at,
            row_split,
        ) = r
        yield {
            "judgement_id": jid,
            "comparison_id": cid,
            "task_id": task_id,
            "annotator": names[annotator],
            "shown_left": None if left_is_a is None else ("A" if left_is_a else "B"),
            "choice": choice,
            "preferred": "A" if choice < 3 else ("B" if choice > 3 else "tie"),
            "both_bad": both_bad,
            "ratings": rating_rows(ratings),
            "first_wrong_step_a": wrong_a,
            "first_wrong_step_b": wrong_b,
            "rationale": rationale,
            "seconds": seconds,
            "synthetic": synthetic,
            "created_at": created_at.astimezone(dt_timezone.utc).strftime(TIME_FORMAT),
            "split": row_split,
            "labelled_by": judgement_labelled_by(synthetic),
        }


def _stepwise_rows(snapshot: DatasetSnapshot, split: str | None) -> Iterator[dict]:
    """The steps of each side up to its first wrong one, labelled (TRL's stepwise supervision)."""
    names = _pseudonyms()
    members = SnapshotJudgement.objects.filter(snapshot=snapshot).order_by("judgement_id")
    if split:
        members = members.filter(split=split)
    marked = members.exclude(judgement__first_wrong_step_a__isnull=True, judgement__first_wrong_step_b__isnull=True)
    for r in marked.values_list(
        "judgement_id",
        "judgement__comparison_id",
        "task_external_id",
        "judgement__comparison__task__prompt",
        "judgement__annotator_id",
        "judgement__synthetic",
        "judgement__first_wrong_step_a",
        "judgement__first_wrong_step_b",
        "judgement__comparison__trajectory_a_id",
        "judgement__comparison__trajectory_a__steps",
        "judgement__comparison__trajectory_b_id",
        "judgement__comparison__trajectory_b__steps",
        "split",
    ).iterator(chunk_size=BATCH):
        jid, cid, task_id, prompt, annotator, synthetic, wrong_a, wrong_b, a_id, steps_a, b_id, steps_b, row_split = r
        for side, wrong, trajectory_id, steps in (("A", wrong_a, a_id, steps_a), ("B", wrong_b, b_id, steps_b)):
            if wrong is None or wrong >= len(steps):
                continue
            completions = [_step_text(s) for s in steps[: wrong + 1]]
            yield {
                "prompt": prompt,
                "completions": completions,
                "labels": [True] * wrong + [False],
                "judgement_id": jid,
                "comparison_id": cid,
                "trajectory_id": trajectory_id,
                "task_id": task_id,
                "annotator": names[annotator],
                "side": side,
                "split": row_split,
                "labelled_by": judgement_labelled_by(synthetic),
            }


# The row makers of the formats other than TRL's pairs, by format name.
_ROWS = {"kto": _kto_rows, "sft": _sft_rows, "dpo": _dpo_rows, "raw": _raw_rows, "steps": _stepwise_rows}


def write_rows(rows: Iterator[dict], path: Path, fmt: str, filetype: str) -> int:
    """Stream rows into one file; returns how many were written."""
    if isinstance(rows, RawCopyBatches):
        return rows.write(path, filetype)
    count = 0
    if filetype == "jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
                count += 1
        return count
    schema = SCHEMAS[fmt]
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        batch: list[dict] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
                batch = []
        if batch or count == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export_bundle_dir(snapshot: DatasetSnapshot, fmt: str, filetype: str, out_dir: Path) -> dict[str, int]:
    """README.md, features.json, manifest.json and data/{train,test}.{filetype} in `out_dir`."""
    _check(fmt, filetype)
    _require_ready(snapshot)
    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    files = {}
    for split in ("train", "test"):
        path = out_dir / "data" / f"{split}.{filetype}"
        files[split] = write_rows(export_rows(snapshot, fmt, split=split), path, fmt, filetype)
        if not files[split]:
            # `datasets` cannot load an empty split file (JSONL or Parquet): it is left out, and the card says so.
            path.unlink()
    written = {split: n for split, n in files.items() if n}
    lengths = None
    if fmt in TRL_LONG_ROWS:  # the rows over TRL's default max_length, for the card (a sample beyond 2,000)
        stride = count_stride(sum(files.values()))
        lengths = length_counts(iter_rows(snapshot, fmt), fmt, snapshot_tokenizer(snapshot), stride=stride)
    card = dataset_card(snapshot, fmt, filetype, written, lengths)
    (out_dir / "README.md").write_text(card, encoding="utf-8")
    (out_dir / "features.json").write_text(json.dumps(features_of(fmt), indent=1) + "\n")
    manifest = {
        "snapshot_id": snapshot.pk,
        "content_hash": snapshot.content_hash,
        "format": fmt,
        "filetype": filetype,
        "files": {
            name: {"sha256": _sha256(out_dir / name), "bytes": (out_dir / name).stat().st_size}
            for name in ["README.md", "features.json"] + [f"data/{s}.{filetype}" for s in written]
        },
        "empty_splits": sorted(split for split, n in files.items() if not n),
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return files


def _zip_dir(src: Path, target: Path) -> None:
    """A zip with fixed timestamps and order, so the same content gives the same bytes."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(path.relative_to(src)), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as f, zf.open(info, "w") as dst:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    dst.write(chunk)


def export_zip(snapshot: DatasetSnapshot, fmt: str, filetype: str, target: Path) -> Path:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        export_bundle_dir(snapshot, fmt, filetype, Path(tmp) / "bundle")
        partial = Path(tmp) / "bundle.zip"
        _zip_dir(Path(tmp) / "bundle", partial)
        os.replace(partial, target)
    return target


# v2: features.json beside the card (JSONL loads with its types); ratings typed in raw; v3: no tie is a TRL row;
# v4: `labelled_by` in every format, the card's length counts and the sft rows of chosen sides
BUNDLE_LAYOUT = "v4"


# The download the snapshot page offers first; the worker builds its bundle as soon as the
# snapshot is frozen (`snapshot_bundle_prepare`), so that download serves a ready file.
DEFAULT_BUNDLE = ("trl", "parquet")


def export_download_path(snapshot: DatasetSnapshot, fmt: str, filetype: str) -> Path:
    """The zipped bundle for a download, built once per snapshot, format and file type."""
    _check(fmt, filetype)
    _require_ready(snapshot)
    folder = Path(settings.EXPORT_DIR) / str(snapshot.pk)
    folder.mkdir(parents=True, exist_ok=True)
    # BUNDLE_LAYOUT in the name: a bundle cached before a change of layout is built again.
    target = folder / f"{snapshot.content_hash[:12]}-{fmt}-{filetype}-{BUNDLE_LAYOUT}.zip"
    if not target.exists():
        export_zip(snapshot, fmt, filetype, target)
    return target


def snapshot_bundle_prepare(*, snapshot_id: int) -> Path | None:
    """Build the default download's bundle of a frozen snapshot (a worker job, queued when the
    build succeeds), so the first download serves a file rather than building it in the web
    process (4.2 s on a loaded 2-core VM, issue 56). The bundle is named by the snapshot's
    content hash, as every download's is; one the worker has not finished yet (or a worker that
    is not running) leaves the download to build it as before. None when there is nothing to
    build (the snapshot failed, or has no TRL rows: its download says why)."""
    snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id, status=DatasetSnapshot.Status.SUCCEEDED).first()
    if snapshot is None:
        return None
    try:
        return export_download_path(snapshot, *DEFAULT_BUNDLE)
    except ArbiterError:
        return None


def export_rows(snapshot: DatasetSnapshot, fmt: str, *, split: str | None = None):
    """The rows to write: COPY batches for `raw` on PostgreSQL, Python rows otherwise."""
    if fmt == "raw" and connection.vendor == "postgresql":
        _require_ready(snapshot)
        return RawCopyBatches(snapshot, split)
    return iter_rows(snapshot, fmt, split=split)


def export_file(snapshot: DatasetSnapshot, fmt: str, out: Path) -> int:
    """One data file (both splits, with a `split` column), its type from the extension."""
    filetype = out.suffix.lstrip(".")
    _check(fmt, filetype)
    _require_ready(snapshot)
    return write_rows(export_rows(snapshot, fmt), out, fmt, filetype)
