"""How many rows of an export exceed TRL's default `max_length`, counted in tokens of the
snapshot's policy, for the dataset card (issue 53: RewardTrainer dropped all 27 rows of an
export at its defaults, and the card said TRL "truncates").

What TRL 1.16 does with a row over `max_length` (1,024 tokens by default in `RewardConfig`,
`DPOConfig`, `KTOConfig` and `SFTConfig`), read from trl/trainer/*_trainer.py:

- `RewardTrainer` (`trl`, `trl_text`) drops every pair whose prompt + chosen or prompt +
  rejected is longer (`_prepare_dataset`, "Filtering ... tokens").
- `DPOTrainer` (`dpo`) and `KTOTrainer` (`kto`) drop a row whose prompt alone fills
  `max_length` ("Dropping fully truncated examples"), and cut the end of the others
  (`truncation_mode="keep_start"`): the end, where the completions differ, is lost.
- `SFTTrainer` (`sft`) cuts the end of a longer conversation.

Tokens are counted with the tokenizer of the policy that played the snapshot's trajectories
(its `tokenizer.json`, through the `tokenizers` library: no transformers or torch in the web
process), the conversational formats through the policy's chat template rendered as
transformers renders it (jinja2's immutable sandbox, `tojson`, trimmed blocks), the text
format as TRL tokenizes it (prompt + completion + the end token). A policy whose model is not
here leaves the count undone, and the card says so.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from jinja2 import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from annotate.models import Comparison, DatasetSnapshot, Policy
from core import json_input

TRL_MAX_LENGTH = 1024  # the default `max_length` of RewardConfig, DPOConfig, KTOConfig and SFTConfig (TRL 1.16)
# The formats whose TRL trainer drops or cuts a row over max_length (what each does: the docstring
# above; the card says it, annotate/export_card.py).
TRL_LONG_ROWS = ("trl", "trl_text", "dpo", "kto", "sft")
# The snapshot page counts lengths in the request only up to PREVIEW_MAX_ROWS; a bundle's card
# counts up to COUNT_MAX_ROWS exactly, and an even sample of about that many beyond
# (`count_stride`): 1,000 pairs of about 2,000 tokens took 14 s on the loaded 2-core VM
# (benchmarks/export_length_count.py, benchmarks/RESULTS.md).
PREVIEW_MAX_ROWS = 200
COUNT_MAX_ROWS = 2000
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "is_error")


@dataclass
class PolicyTokenizer:
    """A policy's tokenizer and chat template, to count tokens as TRL's trainers would."""

    name: str
    tokenizer: object  # tokenizers.Tokenizer
    template: object | None  # a compiled jinja2 template
    special: dict

    def render(self, messages: list[dict], tools, *, generation_prompt: bool = False) -> str:
        """A conversation rendered by the chat template, as `apply_chat_template` renders it."""
        return self.template.render(
            messages=[_as_loaded(m) for m in messages],
            tools=tools,
            add_generation_prompt=generation_prompt,
            **self.special,
        )

    def lengths(self, rows: list[list[str]], *, special: bool) -> list[list[int]]:
        """Token counts of each row's texts; `special`: add the special tokens a tokenizer's
        `__call__` adds (plain text), or none (a rendered chat, as `apply_chat_template`)."""
        flat = [text for texts in rows for text in texts]
        counts = iter(len(e.ids) for e in self.tokenizer.encode_batch(flat, add_special_tokens=special))
        return [[next(counts) for _ in texts] for texts in rows]


def _as_loaded(message: dict) -> dict:
    """A message as `datasets` gives it to TRL: every field of the schema, missing ones None."""
    return {key: message.get(key) for key in _MESSAGE_KEYS}


def _special_token(config: dict, key: str) -> str | None:
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _compile(template: str):
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def load_policy_tokenizer(policy: Policy) -> PolicyTokenizer | None:
    """The tokenizer of a policy's model folder, or None when it has none that can be read."""
    from tokenizers import Tokenizer  # loaded by the web process only when a card counts lengths

    folder = Path(policy.model_dir)
    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = json_input.loads((folder / "tokenizer_config.json").read_text())
    except Exception:  # OSError, bad JSON, or the plain Exception `tokenizers` raises on a file it cannot read
        return None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if not template and (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(errors="replace")
    special = {k: _special_token(config, k) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    try:
        compiled = _compile(template) if isinstance(template, str) and template else None
    except TemplateError:  # a template jinja2 cannot compile: the text format can still be counted
        compiled = None
    return PolicyTokenizer(f"{policy.name} (policy {policy.pk})", tokenizer, compiled, special)


def snapshot_tokenizer(snapshot: DatasetSnapshot) -> PolicyTokenizer | None:
    """The tokenizer of the policy that played most of the snapshot's trajectories, where its
    model is here; else the newest policy with a model here (the default policy); else None."""
    comparisons = Comparison.objects.filter(campaign__in=snapshot.campaigns.all())
    played = Counter(
        pk for pair in comparisons.values_list("trajectory_a__policy_id", "trajectory_b__policy_id") for pk in pair
    )
    with_model = Policy.objects.exclude(model_dir="")
    by_pk = {p.pk: p for p in with_model.filter(pk__in=list(played))}
    candidates = [by_pk[pk] for pk, _ in played.most_common() if pk in by_pk]
    candidates += list(with_model.exclude(pk__in=list(played)).order_by("-created_at")[:5])
    for policy in candidates:
        found = load_policy_tokenizer(policy)
        if found is not None:
            return found
    return None


def _tools(row: dict):
    tools = row.get("tools")
    return json_input.loads(tools) if isinstance(tools, str) else tools


def _with_eos(text: str, eos: str | None) -> str:
    return text if not eos or text.endswith(eos) else text + eos


def row_texts(row: dict, fmt: str, counter: PolicyTokenizer) -> list[str]:
    """The texts TRL tokenizes for one row, in the order `row_fate` reads their lengths: both
    sides (reward formats), the conversation (sft), or the prompt then each completion."""
    if fmt == "trl_text":
        eos = counter.special.get("eos_token")
        return [row["prompt"] + _with_eos(row[side], eos) for side in ("chosen", "rejected")]
    tools = _tools(row)
    if fmt == "trl":
        return [counter.render(row["prompt"] + row[side], tools) for side in ("chosen", "rejected")]
    if fmt == "sft":
        return [counter.render(row["messages"], tools)]
    sides = ("chosen", "rejected") if fmt == "dpo" else ("completion",)
    prompt = counter.render(row["prompt"], tools, generation_prompt=True)
    return [prompt] + [counter.render(row["prompt"] + row[side], tools) for side in sides]


def row_fate(fmt: str, lengths: list[int], max_length: int = TRL_MAX_LENGTH) -> str:
    """What TRL at `max_length` does with a row of these token lengths (`row_texts`' order):
    "kept", "dropped" or "cut"."""
    if fmt in ("trl", "trl_text"):
        return "dropped" if max(lengths) > max_length else "kept"
    if fmt == "sft":
        return "cut" if lengths[0] > max_length else "kept"
    if lengths[0] >= max_length:  # the prompt alone fills it
        return "dropped"
    return "cut" if max(lengths[1:]) > max_length else "kept"


_BATCH = 256  # rows tokenized at a time (`encode_batch` runs on every core)


def length_counts(
    rows, fmt: str, counter: PolicyTokenizer | None, *, limit: int | None = None, stride: int = 1
) -> dict | None:
    """{rows, dropped, cut, counted, stride, max_length, tokenizer} of an export's rows at TRL's
    default max_length: every `stride`-th row is tokenized (`counted` of them), and `dropped` and
    `cut` are scaled to all the rows when the stride is over 1 (an estimate, the card says so).
    {"tokenizer": None} when no tokenizer is here or the policy's chat template cannot render the
    rows; None when the format feeds no TRL trainer, or the rows are more than `limit`."""
    if fmt not in TRL_LONG_ROWS:
        return None
    if counter is None or (counter.template is None and fmt != "trl_text"):
        return {"tokenizer": None, "max_length": TRL_MAX_LENGTH}
    fates: Counter = Counter()
    batch: list[list[str]] = []
    special = fmt == "trl_text"  # a text is tokenized as `tokenizer(text)`; a rendered chat adds none
    total = 0
    try:
        for total, row in enumerate(rows, 1):
            if limit is not None and total > limit:
                return None
            if (total - 1) % stride:
                continue
            batch.append(row_texts(row, fmt, counter))
            if len(batch) == _BATCH:
                fates.update(row_fate(fmt, lengths) for lengths in counter.lengths(batch, special=special))
                batch = []
        fates.update(row_fate(fmt, lengths) for lengths in counter.lengths(batch, special=special))
    except (TemplateError, ValueError, TypeError):  # a chat template that refuses these messages
        return {"tokenizer": None, "max_length": TRL_MAX_LENGTH}
    counted = sum(fates.values())
    scale = total / counted if counted else 0
    return {
        "rows": total,
        "dropped": round(fates["dropped"] * scale),
        "cut": round(fates["cut"] * scale),
        "counted": counted,
        "stride": stride,
        "max_length": TRL_MAX_LENGTH,
        "tokenizer": counter.name,
    }


def count_stride(rows: int) -> int:
    """Every how many rows a bundle's card tokenizes: all of them up to COUNT_MAX_ROWS, then an
    even sample of about that many (tokenizing 100,000 pairs would hold a download for minutes)."""
    return max(1, -(-rows // COUNT_MAX_ROWS))
