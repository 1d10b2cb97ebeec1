"""Pairs that teach a reward model to check the answer (plain Python, no Django).

An **answer pair** made the same tool calls on both sides and answered differently: the loop's
answer branches build them (`same_calls_different_answer`, docs/loop.md), and they are the only
labelled pairs where the answer alone decides. `RewardModelConfig.answer_pair_weight` weighs
their loss up against the natural pairs, which differ in many things at once.

**Derived answer pairs** are made from a decisive labelled pair whose sides answered
differently, two of them: the winner's own episode over the same episode carrying the loser's
answer, and the loser's episode carrying the winner's answer over the loser's own (only the
answer's text changed; its quotes, every call and every page read stay the episode's), so both
directions of a swap are taught, as the answer-swap probe (rewardmodel/probes.py) tests both.
It assumes the preference was about the answer, which is true of annotators who check answers
first (the loop's simulated annotators, `annotator_correct_first`), and not of a preference for
a shorter path between two right answers worded differently. `RewardModelConfig.derived_answer_pairs`
turns it on.

Rows are the `trl` export's (annotate/exports.py): `prompt`, `chosen` and `rejected` message lists.
"""

from __future__ import annotations

from annotate.chat_messages import QUOTES_HEADING
from core import json_input
from core.same_behaviour import answer_key, call_key


def _final(messages: list[dict]) -> dict | None:
    """The side's answer: its last message when that is the assistant's, without tool calls."""
    last = messages[-1] if messages else None
    if last and last.get("role") == "assistant" and not last.get("tool_calls"):
        return last
    return None


def answer_text(messages: list[dict]) -> str | None:
    """The final answer's text without its quotes, or None when the side did not answer."""
    final = _final(messages)
    if final is None:
        return None
    return str(final.get("content") or "").split(QUOTES_HEADING)[0]


def tool_calls(messages: list[dict]) -> frozenset:
    """The set of a side's tool calls, each (tool, arguments as sorted JSON), in any order."""
    calls = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str):  # OpenAI's form: the arguments as a JSON string
                try:
                    arguments = json_input.loads(arguments)
                except json_input.JsonInputError:
                    pass
            calls.add(call_key(function.get("name"), arguments))
    return frozenset(calls)


def answers_differ(row: dict) -> bool:
    """Both sides answered, and not the same answer."""
    chosen, rejected = answer_text(row["chosen"]), answer_text(row["rejected"])
    return chosen is not None and rejected is not None and answer_key(chosen) != answer_key(rejected)


def is_answer_pair(row: dict) -> bool:
    """The same tool calls (at least one) on both sides and different answers: the answer is the difference."""
    calls = tool_calls(row["chosen"])
    return bool(calls) and calls == tool_calls(row["rejected"]) and answers_differ(row)


def with_answer(messages: list[dict], answer: str) -> list[dict]:
    """The side with its final answer's text replaced by `answer`, its quotes kept."""
    final = _final(messages)
    content = str(final.get("content") or "")
    quotes = content[content.index(QUOTES_HEADING) :] if QUOTES_HEADING in content else ""
    return [*messages[:-1], {**final, "content": answer + quotes}]


def derived_answer_pairs(rows: list[dict]) -> list[dict]:
    """For each decisive pair whose sides answered differently and that is not an answer pair
    already, two pairs marked `derived` with the source pair's margin: the winner over the winner
    with the loser's answer, and the loser with the winner's answer over the loser."""
    derived = []
    for row in rows:
        if row.get("preferred") == "tie" or row.get("margin") == 0 or not answers_differ(row):
            continue
        if is_answer_pair(row):  # its two sides are such a pair already
            continue
        won, lost = answer_text(row["chosen"]), answer_text(row["rejected"])
        derived.append({**row, "rejected": with_answer(row["chosen"], lost), "derived": True})
        derived.append({**row, "chosen": with_answer(row["rejected"], won), "derived": True})
    return derived
