"""How an episode becomes tokens, and which of them the agent produced.

    <|bos|><|user|>{question}<|end|>
    <|assistant|>{action}<|end|>          the action and its <|end|> are agent tokens
    <|tool|>{observation}<|end|>          environment tokens
    ... one assistant/tool pair per step, the last action being answer[...]

Segments are tokenized one by one, so training sees the same boundaries as generation
(which starts right after <|assistant|> and stops at <|end|>).

The default policy spells text arguments with a space after the bracket
(`search[ Ilse Marrow]`, see `model_action`): a byte-level BPE gives a word different
tokens with and without a leading space, and in the question and the pages names always
follow a space, so only this spelling lets the policy copy them token for token.
"""
from __future__ import annotations

import re

SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


_TEXT_ARGUMENT = re.compile(r"^(search|find|quote|answer)\[(?! )")


def model_action(action: str) -> str:
    """How the default policy writes an action: `search[Ilse Marrow]` -> `search[ Ilse Marrow]`.
    The browser strips the argument, so both spellings act the same."""
    return _TEXT_ARGUMENT.sub(r"\1[ ", action, count=1)


def prompt_text(question: str) -> str:
    return f"<|bos|><|user|>{question}<|end|>"


def observation_text(observation: str) -> str:
    return f"<|tool|>{observation}<|end|>"


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def episode_tokens(tokenizer, question: str, turns: list[tuple[str, str | None]]) -> tuple[list[int], list[int]]:
    """(ids, agent_mask) for a question and its (action, observation) turns."""
    ids = encode(tokenizer, prompt_text(question))
    mask = [0] * len(ids)
    for action, observation in turns:
        prefix = encode(tokenizer, "<|assistant|>")
        act = encode(tokenizer, action + "<|end|>")
        ids += prefix + act
        mask += [0] * len(prefix) + [1] * len(act)
        if observation is not None:
            obs = encode(tokenizer, observation_text(observation))
            ids += obs
            mask += [0] * len(obs)
    return ids, mask


def turns_of(episode) -> list[tuple[str, str | None]]:
    """(action text, observation) pairs of a finished browser episode."""
    observations = [s["content"] for s in episode.steps if s["kind"] == "observation"]
    turns = []
    for i, action in enumerate(episode.actions):
        turns.append((action, observations[i] if i < len(observations) else None))
    return turns
