"""Policy model directories: build the default tokenizer and model from nothing, load any
Hugging Face causal LM directory, save with `save_pretrained`."""

from __future__ import annotations

from pathlib import Path

from training.policy.checkpoints import write_checkpoint
from training.policy.layout import CHAT_TEMPLATE, LEGACY_TEMPLATES, SPECIAL_TOKENS


class PolicyLoadError(ValueError):
    """The directory is not a causal language model Arbiter can use; the message says why."""


def train_tokenizer(texts, *, vocab_size: int = 2048):
    """A byte-level BPE tokenizer trained locally, with the chat template and special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer, *, hidden: int = 256, layers: int = 6, heads: int = 4, seed: int = 0):
    """A small Llama-style causal LM from config (about 5M parameters at the defaults)."""
    from transformers import LlamaConfig, LlamaForCausalLM, set_seed

    set_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=int(hidden * 8 / 3) // 8 * 8,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def load_policy(model_dir: str | Path, *, device: str = "cpu"):
    """(model, tokenizer) from a directory; anything but a causal LM is refused clearly."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir)
    if not (path / "config.json").exists():
        raise PolicyLoadError(f"{path}: no config.json, so not a Hugging Face model directory.")
    try:
        config = AutoConfig.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, config=config)
    except (ValueError, OSError, KeyError) as exc:
        raise PolicyLoadError(f"{path}: not a causal language model ({exc}).") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (ValueError, OSError) as exc:
        raise PolicyLoadError(f"{path}: no usable tokenizer ({exc}).") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) in LEGACY_TEMPLATES:
        tokenizer.chat_template = CHAT_TEMPLATE
    return model.to(device).eval(), tokenizer


# Text the two tokenizers must split alike: words, code, numbers, accents, CJK, emoji, whitespace.
TOKENIZER_PROBE = (
    'Who founded Veloran Glassworks? search[founded] -> {"n": 3, "x": [1.5e3, -2]}\n\t  '
    "Zoë's café, São Paulo; 東京都; Привет; 🙂 <tool_call>def f(x):\n    return x**2</tool_call>"
)


def same_tokenizer(dir_a: str | Path, dir_b: str | Path) -> bool:
    """Whether two model directories' tokenizers do the same thing: the same vocabulary, added and
    special tokens, chat template, and the same ids for a probe text. Not their files' bytes:
    transformers re-serialises tokenizer.json when a fine-tuned child is saved (another version,
    another key order), and the child still tokenizes as its parent does."""
    from transformers import AutoTokenizer

    files = [Path(d) / "tokenizer.json" for d in (dir_a, dir_b)]
    if all(f.exists() for f in files) and files[0].read_bytes() == files[1].read_bytes():
        return True  # the common case, without loading anything
    try:
        a, b = (AutoTokenizer.from_pretrained(Path(d)) for d in (dir_a, dir_b))
    except (ValueError, OSError):
        return False
    return (
        a.get_vocab() == b.get_vocab()
        and {i: str(t) for i, t in a.added_tokens_decoder.items()}
        == {i: str(t) for i, t in b.added_tokens_decoder.items()}
        and a.special_tokens_map == b.special_tokens_map
        and getattr(a, "chat_template", None) == getattr(b, "chat_template", None)
        and a(TOKENIZER_PROBE)["input_ids"] == b(TOKENIZER_PROBE)["input_ids"]
    )


def save_policy(model, tokenizer, model_dir: str | Path, *, tool_parser: str = "") -> Path:
    """Save with `save_pretrained` (training/policy/checkpoints.py, the one way a policy is
    written); `tool_parser` is written to arbiter_policy.json beside it."""
    return write_checkpoint(model_dir, model, tokenizer, tool_parser=tool_parser)
