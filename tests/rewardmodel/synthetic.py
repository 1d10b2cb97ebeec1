"""Synthetic preference pairs in the `trl` export form, where the better side is known.

The chosen side reaches its answer cleanly; in the rejected side one or two of its turns are
invalid actions with error observations. Both sides draw their number of turns from the
same range, so length alone does not tell them apart.
"""

from __future__ import annotations

import copy
import random
from functools import lru_cache

from annotate.chat_messages import prompt_messages, steps_to_messages
from tests_env import VAR_DIR

WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lagoon",
    "meadow",
    "nickel",
    "onyx",
    "pebble",
    "quarry",
    "raven",
    "saffron",
    "tundra",
]
ERROR = "Error: Invalid action. Use search[...], open[n], find[...], quote[...] or answer[...]."


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def trajectory(rng: random.Random, *, steps: int, errors: int, observation_words: int = 12) -> list[dict]:
    """Canonical steps: `steps` searches, `errors` invalid actions among them, then an answer with a quote."""
    turns = [("search", {"query": _phrase(rng, 2)}, _phrase(rng, observation_words)) for _ in range(steps)]
    for _ in range(errors):
        turns.insert(rng.randrange(len(turns) + 1), ("invalid", _phrase(rng, 2) + " ??", ERROR))
    out: list[dict] = []
    for tool, arguments, observation in turns:
        out.append({"kind": "action", "tool": tool, "arguments": arguments})
        out.append({"kind": "observation", "tool": tool, "content": observation, "is_error": tool == "invalid"})
    out.append({"kind": "answer", "text": rng.choice(WORDS), "quotes": [_phrase(rng, 4)]})
    return out


def question(rng: random.Random) -> str:
    return f"Which {rng.choice(WORDS)} lies beside the {rng.choice(WORDS)}?"


def pair(rng: random.Random) -> dict:
    """One `trl` row: the clean side chosen, the erring side rejected."""
    good = trajectory(rng, steps=rng.randint(1, 3), errors=0)
    turns = rng.randint(1, 3)
    errors = rng.randint(1, min(2, turns))
    bad = trajectory(rng, steps=turns - errors, errors=errors)
    return {
        "prompt": prompt_messages(question(rng)),
        "chosen": steps_to_messages(good),
        "rejected": steps_to_messages(bad),
        "margin": 1.0,
        "preferred": "A",
    }


def pairs(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [pair(rng) for _ in range(n)]


def tokenizer_texts() -> list[str]:
    """Text in the serialized form, to train a small BPE tokenizer on."""
    rng = random.Random(1)
    labels = "Question: Thought: Action: Observation: Answer: search[ invalid[ ] [...] steps omitted"
    return [labels, ERROR] * 20 + [f"{question(rng)} {_phrase(rng, 30)}" for _ in range(200)]


@lru_cache(maxsize=1)
def bpe_tokenizer_dir() -> str:
    """A small BPE tokenizer like the default policy's (pad <|pad|>, eos <|eos|>), saved once per test process."""
    from training.policy.model_io import train_tokenizer

    path = VAR_DIR / "test-tokenizer"
    train_tokenizer(tokenizer_texts(), vocab_size=512).save_pretrained(path)
    return str(path)


def bpe_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(bpe_tokenizer_dir())


@lru_cache(maxsize=1)
def _minilm_tokenizer():
    from transformers import AutoTokenizer

    from rewardmodel.backbones import minilm_dir

    return AutoTokenizer.from_pretrained(minilm_dir())


def minilm_tokenizer():
    return copy.deepcopy(_minilm_tokenizer())
