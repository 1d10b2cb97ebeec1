"""How an episode becomes tokens, and which of them the agent produced.

    <|bos|><|user|>{question}<|end|>
    <|assistant|>{action}<|end|>          the action and its <|end|> are agent tokens
    <|tool|>{observation}<|end|>          environment tokens
    ... one assistant/tool pair per step, the last action being answer[...]

Segments are tokenized one by one, so training sees the same boundaries as generation
(which starts right after <|assistant|> and stops at <|end|>).
"""
from __future__ import annotations

SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


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
