"""The dataset card of an export bundle (README.md, Hugging Face's card with YAML metadata):
what the format is, the trainer it feeds, whose votes it holds, its ties, labels, length
advice, columns and how to load it. annotate/exports.py writes it into every bundle; the
snapshot's page shows it before a download (`dataset_card_preview`)."""

from __future__ import annotations

import yaml

from annotate.export_schemas import SCHEMAS
from annotate.models import DatasetSnapshot
from webapp.version import VERSION

DESCRIPTIONS = {
    "trl": "Preference pairs as chat messages with structured tool calls, the system prompt and the tools.",
    "trl_text": "Preference pairs as plain-text transcripts, for models without a chat template.",
    "kto": "Unpaired trajectories labelled desirable or undesirable from the judgements (rule below).",
    "raw": "One row per judgement, annotators pseudonymized.",
    "steps": "Step-level labels from first-wrong-step marks (stepwise supervision) for process reward models.",
    "sft": "People's accepted corrections as whole conversations (messages with tool calls and tool results, and "
    "the tools), to imitate.",
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
    "sft": "no accepted correction is in this snapshot",
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
    """Whose votes the snapshot holds, in words: the card and the snapshot's page say it."""
    feedback = snapshot.filters.get("feedback", "human")
    sources = snapshot.stats.get("sources", {})
    judges = ", ".join(j["name"] for j in snapshot.stats.get("judges", [])) or "none"
    if feedback == "human":
        return "People's votes only: judges' votes (AI feedback) are excluded. Every pair has `source` human."
    if feedback == "ai":
        return (
            f"AI feedback only: each pair is the majority of the first votes of the judges {judges} "
            f"({sources.get('ai', 0)} pairs, `source` ai); people's votes are not in it."
        )
    return (
        f"People's votes and AI feedback, kept apart: a comparison people voted on is their pair (`source` human, "
        f"{sources.get('human', 0)} pairs); one only judges voted on is the judges' pair (`source` ai, "
        f"{sources.get('ai', 0)} pairs; judges {judges}). Filter on `source` to train on either. The `raw`, "
        "`steps` and `kto` files hold people's judgements only."
    )


def dataset_card(snapshot: DatasetSnapshot, fmt: str, filetype: str, files: dict[str, int]) -> str:
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
    return (
        "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"
        f"# {snapshot.name}\n\n{snapshot.description}\n\n{DESCRIPTIONS[fmt]}\n\n"
        f"Frozen snapshot {snapshot.pk} of Arbiter, content hash `{snapshot.content_hash}`. "
        f"Aggregation: {snapshot.get_aggregation_display().lower()}; ties: {snapshot.get_ties_display().lower()}. "
        "Train and test are split by task, so no task is in both. Annotators are pseudonymized; "
        "gold comparisons are left out, and synthetic judgements unless the filters say otherwise.\n\n"
        f"## Feedback\n\n{feedback_sentence(snapshot)}\n\n"
        "## Files\n\n"
        + "\n".join(f"- `data/{s}.{filetype}`: {n} rows, format `{fmt}` ({filetype})" for s, n in files.items())
        + f"\n\nFormat `{fmt}` feeds {TRAINERS[fmt]}.\n"
        + (f"\n## Ties\n\n{_ties_sentence(snapshot)}\n" if fmt in ("trl", "trl_text", "dpo") else "")
        + (f"\n## Labels\n\n{KTO_RULE}\n" if fmt == "kto" else "")
        + (f"\n## Length\n\n{LENGTH_NOTES[fmt]}\n" if fmt in LENGTH_NOTES else "")
        + "\n## Columns\n\n| column | type |\n|---|---|\n"
        + columns
        + (
            f"\n\n## Loading\n\nFrom the folder the bundle was unzipped into:\n\n```python\n{load}\n```\n"
            if files
            else f"\n\n## Loading\n\nThis export has no rows ({EMPTY_REASONS.get(fmt, 'nothing in this snapshot')}), "
            "so there is nothing to load.\n"
        )
    )


# TRL 1.16's trainers default to max_length=1024 tokens; an agent's trajectory with its tool results
# is often longer, and each trainer then fails in its own way (read from trl/trainer/*_config.py).
_LENGTH_WHY = "Agent trajectories with their tool results often run past 1,024 tokens, TRL's default `max_length`. "
LENGTH_NOTES = {
    "trl": _LENGTH_WHY
    + "`RewardTrainer` then *drops* every pair whose chosen or rejected side is longer (a dataset of long "
    "trajectories becomes empty and the trainer refuses it). Set `RewardConfig(max_length=None)`, or a length "
    "your memory allows that covers your rows.",
    "trl_text": _LENGTH_WHY + "`RewardTrainer` then *drops* every pair whose chosen or rejected text is longer. Set "
    "`RewardConfig(max_length=None)`, or a length that covers your rows.",
    "dpo": _LENGTH_WHY
    + "`DPOTrainer` then truncates each sequence, keeping its start: the end, where the two completions differ "
    "and the preference lies, is cut. Set `DPOConfig(max_length=None)`, or a length that covers your rows.",
    "kto": _LENGTH_WHY
    + "`KTOTrainer` then truncates from the right, cutting the completion that carries the label. Set "
    "`KTOConfig(max_length=None)`, or a length that covers your rows.",
}


def _ties_sentence(snapshot: DatasetSnapshot) -> str:
    ties = snapshot.stats.get("ties", 0)
    if not ties:
        return "The snapshot holds no ties."
    return (
        f'{ties} tied pairs of the snapshot are not rows here: TRL trains every row as "chosen beats rejected", '
        "so a tie written as a pair would be taught as a preference. Their judgements are in the `raw` export."
    )


def dataset_card_preview(snapshot: DatasetSnapshot, fmt: str) -> tuple[str, str]:
    """The card a `fmt` Parquet download carries, as (YAML metadata, Markdown body), for the snapshot's
    page; rows per split from the snapshot's counts (exact for the pair formats)."""
    stats = snapshot.stats
    pairs = {"train": stats.get("train_pairs", 0), "test": stats.get("test_pairs", 0)}
    if fmt in ("trl", "trl_text", "dpo"):  # no tie is a row of these
        pairs = {split: n - stats.get(f"{split}_ties", 0) for split, n in pairs.items()}
    if fmt in ("sft", "dpo"):  # rows from corrections (and, for dpo, the pairs; ties give none: at most these)
        fixes = {"train": stats.get("train_corrections", 0), "test": stats.get("test_corrections", 0)}
        pairs = fixes if fmt == "sft" else {split: pairs[split] + fixes[split] for split in pairs}
    card = dataset_card(snapshot, fmt, "parquet", {split: n for split, n in pairs.items() if n})
    _, meta, body = card.split("---\n", 2)
    return meta, body
