"""The dataset card of an export bundle (README.md, Hugging Face's card with YAML metadata):
what the format is, the trainer it feeds, whose votes it holds, its ties, labels, length
advice, columns and how to load it. annotate/exports.py writes it into every bundle; the
snapshot's page shows it before a download (`dataset_card_preview`, annotate/export_preview.py)."""

from __future__ import annotations

import yaml

from annotate.export_labels import both_bad_pairs, both_bad_pairs_by_split, labelled_by_counts, labelled_by_sentence
from annotate.export_lengths import TRL_LONG_ROWS, TRL_MAX_LENGTH
from annotate.export_schemas import SCHEMAS
from annotate.models import DatasetSnapshot, SnapshotCorrection, SnapshotJudgement, SnapshotPair
from webapp.version import VERSION

DESCRIPTIONS = {
    "trl": "Preference pairs as chat messages with structured tool calls, the system prompt and the tools.",
    "trl_text": "Preference pairs as plain-text transcripts, for models without a chat template.",
    "kto": "Unpaired trajectories labelled desirable or undesirable from the judgements (rule below).",
    "raw": "One row per judgement, annotators pseudonymized.",
    "steps": "Step-level labels from first-wrong-step marks (stepwise supervision) for process reward models.",
    "sft": "Whole conversations to imitate (messages with tool calls and tool results, and the tools): people's "
    "accepted corrections (`origin` correction), then the chosen side of each pair (`origin` chosen), which is the "
    "better of two trajectories, not one a person checked or corrected.",
    "dpo": "Preference rows: each accepted correction against the trajectory it corrects (chosen = corrected, "
    "rejected = original, the prompt holding the steps they share), then the snapshot's comparison pairs.",
}
# The trainer each format feeds, for the dataset card (TRL as pinned in requirements.txt).
TRAINERS = {
    "trl": "TRL's `RewardTrainer` (conversational preference data with an explicit prompt; `tools` goes to the "
    "chat template); also `DPOTrainer`",
    "trl_text": "TRL's `RewardTrainer` (standard, non-conversational preference data; TRL adds the EOS token)",
    "kto": "TRL's `KTOTrainer` (conversational unpaired preference data: `prompt`, `completion`, boolean `label`; "
    "`tools` goes to the chat template)",
    "raw": "no trainer: the judgements as given, for analysis and agreement studies",
    "steps": "a process reward model. The columns are TRL's stepwise-supervision format (`prompt`, "
    "`completions`, `labels`), but TRL 1.16 has no trainer for it: `PRMTrainer` was removed from "
    "`trl.experimental` (huggingface/trl#7133); it trains with that trainer from an earlier TRL or any "
    "token-classification loop that labels the last token of each step",
    "sft": "TRL's `SFTTrainer` (conversational language modeling: a `messages` column; `tools` goes to the chat "
    "template)",
    "dpo": "TRL's `DPOTrainer` (conversational preference data with an explicit prompt; `tools` goes to the chat "
    "template)",
}
EMPTY_REASONS = {
    "sft": "no accepted correction is in this snapshot, and every pair is a tie or called both bad",
    "steps": "no judgement of this snapshot marks a first wrong step",
    "kto": "every judgement is a tie or a slight preference, which gives no KTO row",
}
TRL_TRAINERS = {
    "trl": "RewardTrainer",
    "trl_text": "RewardTrainer",
    "kto": "KTOTrainer",
    "raw": None,
    "steps": None,
    "sft": "SFTTrainer",
    "dpo": "DPOTrainer",
}
KTO_RULE = (
    "One row per judged side, from each judgement on its own (several annotators give several rows): "
    "a `both_bad` judgement makes both sides undesirable, whatever side it preferred; otherwise the preferred "
    "side (choice 1, 2 for A; 4, 5 for B) is desirable, and the other side is undesirable only when the "
    'preference is strong ("much better", choice 1 or 5); a tie (choice 3) gives no row. A slight preference '
    "says which side is better, not that the other is bad, so its losing side gives no row."
)


def feedback_sentence(snapshot: DatasetSnapshot) -> str:
    """Whose votes the snapshot holds, in words: the card and the snapshot's page say it. The
    `feedback` filter's words (human, ai, both) are the `source` column's; who labelled each row
    (people or simulated annotators, judges) is `labelled_by`."""
    feedback = snapshot.filters.get("feedback", "human")
    sources = snapshot.stats.get("sources", {})
    judges = ", ".join(j["name"] for j in snapshot.stats.get("judges", [])) or "none"
    annotators = (
        "annotators' votes (people's and, since the snapshot includes synthetic judgements, simulated annotators')"
        if snapshot.filters.get("include_synthetic")
        else "people's votes (synthetic judgements are left out)"
    )
    if feedback == "human":
        return (
            f"Feedback `human`: {annotators}; judges' votes (AI feedback) are excluded. Every pair has `source` human."
        )
    if feedback == "ai":
        return (
            f"Feedback `ai`: AI feedback only: each pair is the majority of the first votes of the judges {judges} "
            f"({sources.get('ai', 0)} pairs, `source` ai); annotators' votes are not in it."
        )
    return (
        f"Feedback `both`: {annotators} and AI feedback, kept apart: a comparison annotators voted on is theirs "
        f"(`source` human, {sources.get('human', 0)} pairs); one only judges voted on is the judges' pair (`source` ai, "
        f"{sources.get('ai', 0)} pairs; judges {judges}). Filter on `source` to train on either. The `raw`, "
        "`steps` and `kto` files hold annotators' judgements only."
    )


def labelled_by_section(snapshot: DatasetSnapshot, fmt: str) -> str:
    """Who labelled the rows, with counts: the `labelled_by` column's words."""
    unit = {"trl": "pairs", "trl_text": "pairs", "dpo": "rows", "sft": "rows"}.get(fmt, "judgements")
    counts = labelled_by_counts(snapshot, fmt)
    source = {"kto": " (the judgements the rows come from)", "steps": " (the judgements the rows come from)"}
    return (
        labelled_by_sentence(counts, unit).rstrip(".")
        + source.get(fmt, "")
        + ". Every row's `labelled_by` column says who labelled it: `people`, `simulated` (simulated annotators), "
        '`mixed` (a pair aggregated from both) or `judge` (AI feedback). Filter on `labelled_by == "people"` to '
        "train on people's labels only."
    )


def dataset_card(
    snapshot: DatasetSnapshot, fmt: str, filetype: str, files: dict[str, int], lengths: dict | None = None
) -> str:
    """The card of a bundle; `lengths`: `export_lengths.length_counts` of its rows (None: not counted)."""
    meta = {
        "pretty_name": f"Arbiter snapshot {snapshot.pk}: {snapshot.name}",
        "tags": ["rlhf", "preferences", "agents", "arbiter"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": split, "path": f"data/{split}.{filetype}"} for split in files],
            }
        ],
        "dataset_info": {"splits": [{"name": split, "num_examples": n} for split, n in files.items()]},
        "arbiter": {
            "snapshot_id": snapshot.pk,
            "content_hash": snapshot.content_hash,
            "format": fmt,
            "trl_trainer": TRL_TRAINERS[fmt],
            "campaigns": sorted(snapshot.campaigns.values_list("name", flat=True)),
            "filters": snapshot.filters,
            "aggregation": snapshot.aggregation,
            "ties": snapshot.ties,
            "seed": snapshot.seed,
            "test_fraction": snapshot.test_fraction,
            "stats": snapshot.stats,
            "labelled_by": labelled_by_counts(snapshot, fmt),
            "software": f"arbiter {VERSION}",
        },
    }
    columns = "\n".join(f"| `{f.name}` | `{f.type}` |" for f in SCHEMAS[fmt])
    data_files = "{" + ", ".join(f'"{split}": "data/{split}.{filetype}"' for split in files) + "}"
    if filetype == "jsonl":  # JSON lines carry no types: the bundle's features.json gives them
        load = (
            "import json\nfrom datasets import Features, load_dataset\n"
            'features = Features.from_dict(json.load(open("features.json")))\n'
            f'ds = load_dataset("json", data_files={data_files}, features=features)'
        )
    else:
        load = f'from datasets import load_dataset\nds = load_dataset("parquet", data_files={data_files})'
    pairs = fmt in ("trl", "trl_text", "dpo")
    return (
        "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"
        f"# {snapshot.name}\n\n{snapshot.description}\n\n{DESCRIPTIONS[fmt]}\n\n"
        f"Frozen snapshot {snapshot.pk} of Arbiter, content hash `{snapshot.content_hash}`. "
        f"Aggregation: {snapshot.get_aggregation_display().lower()}; ties: {snapshot.get_ties_display().lower()}. "
        "Train and test are split by task, so no task is in both. Annotators are pseudonymized; "
        "gold comparisons are left out, and synthetic judgements unless the filters say otherwise.\n\n"
        f"## Feedback\n\n{feedback_sentence(snapshot)}\n\n"
        f"## Labelled by\n\n{labelled_by_section(snapshot, fmt)}\n\n"
        "## Files\n\n"
        + "\n".join(f"- `data/{s}.{filetype}`: {n} rows, format `{fmt}` ({filetype})" for s, n in files.items())
        + f"\n\nFormat `{fmt}` feeds {TRAINERS[fmt]}.\n"
        + (f"\n## Ties\n\n{_ties_sentence(snapshot)}\n" if pairs else "")
        + (f"\n## Both bad\n\n{_both_bad_sentence(snapshot, fmt)}\n" if pairs or fmt == "sft" else "")
        + (f"\n## Margin\n\n{MARGIN_NOTE}\n" if fmt in ("trl", "trl_text") else "")
        + (f"\n## Labels\n\n{KTO_RULE}\n" if fmt == "kto" else "")
        + (f"\n## Length\n\n{length_section(fmt, lengths)}\n" if fmt in TRL_LONG_ROWS else "")
        + "\n## Columns\n\n| column | type |\n|---|---|\n"
        + columns
        + (
            f"\n\n## Loading\n\nFrom the folder the bundle was unzipped into:\n\n```python\n{load}\n```\n"
            if files
            else f"\n\n## Loading\n\nThis export has no rows ({EMPTY_REASONS.get(fmt, 'nothing in this snapshot')}), "
            "so there is nothing to load.\n"
        )
    )


MARGIN_NOTE = (
    "`margin` enters `RewardTrainer`'s loss: when the column is present TRL trains on "
    "-log sigmoid(r_chosen - r_rejected - margin), so a pair must be won by at least its margin. Here the margin is "
    "a vote share under the majority rule (votes for the winner minus votes for the other side, over the votes, in "
    "[0, 1]) or the mean preference under the mean rule (in [0, 2]): not a reward difference. Remove the column "
    '(`ds.remove_columns("margin")`) to train on the plain Bradley-Terry loss.'
)
_CONFIGS = {
    "trl": "RewardConfig",
    "trl_text": "RewardConfig",
    "dpo": "DPOConfig",
    "kto": "KTOConfig",
    "sft": "SFTConfig",
}
_TRL_DOES = {
    "trl": "`RewardTrainer` *drops* every pair whose prompt + chosen or prompt + rejected is longer (an export of "
    "long trajectories can become empty, and the trainer then fails with `num_samples=0`).",
    "trl_text": "`RewardTrainer` *drops* every pair whose prompt + chosen or prompt + rejected text (with the end "
    "token TRL adds) is longer.",
    "dpo": "`DPOTrainer` *drops* a row whose prompt alone fills `max_length`, and cuts the end of the others "
    "(`truncation_mode` keep_start): the end, where the two completions differ and the preference lies, is lost.",
    "kto": "`KTOTrainer` *drops* a row whose prompt alone fills `max_length`, and cuts the end of the others: "
    "the end of the completion that carries the label is lost.",
    "sft": "`SFTTrainer` cuts the end of a longer conversation (`truncation_mode` keep_start).",
}


def length_section(fmt: str, lengths: dict | None) -> str:
    """What TRL 1.16 does at its default `max_length` (1,024 tokens) and how many rows it hits."""
    text = (
        f"TRL's default `max_length` is {TRL_MAX_LENGTH:,} tokens; agent trajectories with their tool results "
        f"often run past it. {_TRL_DOES[fmt]} "
    )
    if lengths is None:
        text += "The rows are counted against it in the downloaded bundle's card (too many to count on this page). "
    elif lengths.get("tokenizer") is None:
        text += (
            "No tokenizer of the snapshot's policy is here (no policy with a model folder, or one whose chat "
            "template cannot render these rows), so the rows were not counted against it. "
        )
    else:
        about = "about " if lengths.get("stride", 1) > 1 else ""
        text += (
            f"Counted with the tokenizer of {lengths['tokenizer']}: of {lengths['rows']} rows, "
            f"{about}{lengths['dropped']} would be dropped"
            + (f" and {about}{lengths['cut']} cut" if fmt in ("dpo", "kto", "sft") else "")
            + " at TRL's default"
            + (
                f" (estimated from one row in every {lengths['stride']}: {lengths['counted']} rows tokenized). "
                if about
                else ". "
            )
        )
    return text + f"Set `{_CONFIGS[fmt]}(max_length=None)`, or a length your memory allows that covers your rows."


def _both_bad_sentence(snapshot: DatasetSnapshot, fmt: str) -> str:
    n = both_bad_pairs(snapshot)
    if fmt == "sft":
        return (
            f"{n} comparisons where every vote said both sides were bad give no chosen-side row: a side people "
            "called bad is not one to imitate."
            if n
            else "No comparison of the snapshot had every vote say both sides were bad."
        )
    if not n:
        return "No pair of the snapshot had every vote say both sides were bad."
    return (
        f"{n} pairs are rows although every vote on them said both sides were bad: the preferred side is only the "
        "less bad one. Their `both_bad` column is true; filter them out "
        '(`ds.filter(lambda r: not r["both_bad"])`) to train only on preferences for a good side.'
    )


def _ties_sentence(snapshot: DatasetSnapshot) -> str:
    ties = snapshot.stats.get("ties", 0)
    if not ties:
        return "The snapshot holds no ties."
    return (
        f'{ties} tied pairs of the snapshot are not rows here: TRL trains every row as "chosen beats rejected", '
        "so a tie written as a pair would be taught as a preference. Their judgements are in the `raw` export."
    )


def preview_rows(snapshot: DatasetSnapshot, fmt: str) -> dict[str, int]:
    """Rows per split of a `fmt` export, from the snapshot's counts (exact for the pair formats
    and sft; the judgement formats give the pairs' counts): the card's preview and the page's
    download links ("empty") read it."""
    stats = snapshot.stats
    pairs = {"train": stats.get("train_pairs", 0), "test": stats.get("test_pairs", 0)}
    if fmt in ("trl", "trl_text", "dpo", "sft"):  # no tie is a row of these
        pairs = {split: n - stats.get(f"{split}_ties", 0) for split, n in pairs.items()}
    if fmt == "sft":  # a chosen side is no row where every vote called both sides bad
        bad = both_bad_pairs_by_split(snapshot)
        pairs = {split: n - bad.get(split, 0) for split, n in pairs.items()}
    if fmt in ("sft", "dpo"):  # rows from corrections, then the pairs
        fixes = {"train": stats.get("train_corrections", 0), "test": stats.get("test_corrections", 0)}
        pairs = {split: pairs[split] + fixes[split] for split in pairs}
    if fmt == "steps" and not stats.get("marked_judgements", 1):
        pairs = {"train": 0, "test": 0}
    return pairs


def empty_exports(snapshot: DatasetSnapshot) -> set[str]:
    """The formats whose bundle would hold no row, so the snapshot's page says "empty" on their
    links before anyone downloads one (cheap queries, not the rows)."""
    members = SnapshotJudgement.objects.filter(snapshot=snapshot)
    found = {
        "trl": SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie").exists(),
        "raw": members.exists(),
        "steps": members.exclude(
            judgement__first_wrong_step_a__isnull=True, judgement__first_wrong_step_b__isnull=True
        ).exists(),
        "kto": members.exclude(judgement__choice=3, judgement__both_bad=False).exists(),
    }
    corrections = SnapshotCorrection.objects.filter(snapshot=snapshot).exists()
    found["trl_text"] = found["trl"]
    found["dpo"] = found["trl"] or corrections
    found["sft"] = corrections or sum(preview_rows(snapshot, "sft").values()) > 0
    return {fmt for fmt, has_rows in found.items() if not has_rows}
