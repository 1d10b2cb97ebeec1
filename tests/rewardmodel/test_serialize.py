"""Serialization: one side of a pair as text that fits the budget, cut in the documented order."""

import pytest

from annotate.chat_messages import prompt_messages, steps_to_messages
from rewardmodel.serialize import (
    CUT_MARK,
    MIN_OBSERVATION_CHARS,
    episode_text,
    pair_text,
)
from tests.rewardmodel.synthetic import bpe_tokenizer, minilm_tokenizer
from tests.samples import canonical

QUESTION = "Who founded the Veloran Glassworks?"
ANSWER = "Ilse Marrow\n\nQuotes:\n> founded in 1821 by Ilse Marrow"


def _tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


def _long_steps(n_steps: int, observation_chars: int) -> list[dict]:
    steps = [{"kind": "thought", "text": "I should search first."}]
    for i in range(n_steps):
        page = f"page {i} says " + "the glassworks stood on the river bank for many years. " * 400
        steps += [
            {"kind": "action", "tool": "search", "arguments": {"query": f"step {i}"}},
            {"kind": "observation", "tool": "search", "content": page[:observation_chars]},
        ]
    steps.append({"kind": "answer", "text": "Ilse Marrow", "quotes": ["founded in 1821 by Ilse Marrow"]})
    return steps


def _observations(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("Observation: ")]


def test_a_short_trajectory_reads_as_a_plain_transcript():
    sample = canonical(prompt="Who founded Veloran?")
    text = episode_text(sample["task"]["prompt"], sample["steps"], bpe_tokenizer(), 512)
    assert text == (
        "Question: Who founded Veloran?\n"
        "Thought: search for it (0)\n"
        "Action: search[Veloran]\n"
        "Observation: [0] Veloran Glassworks\n"
        "Answer: Ilse Marrow\n\nQuotes:\n> founded by Ilse Marrow"
    )


def test_arguments_read_as_the_browser_writes_them():
    steps = [
        {"kind": "action", "tool": "open", "arguments": {"n": 2}},
        {"kind": "observation", "tool": "open", "content": "a page"},
        {"kind": "action", "tool": "invalid", "arguments": "jump around"},
        {"kind": "observation", "tool": "invalid", "content": "Error: Invalid action."},
        {"kind": "action", "tool": "lookup", "arguments": {"page": "Veloran", "line": 3}},
        {"kind": "observation", "tool": "lookup", "content": "line 3"},
    ]
    text = episode_text("q?", steps, bpe_tokenizer(), 512)
    assert "Action: open[2]\n" in text
    assert "Action: invalid[jump around]\n" in text
    assert 'Action: lookup[{"line": 3, "page": "Veloran"}]\n' in text


@pytest.mark.parametrize("make_tokenizer", [bpe_tokenizer, minilm_tokenizer], ids=["policy-bpe", "minilm"])
@pytest.mark.parametrize("budget", [128, 256, 512])
def test_a_huge_trajectory_fits_and_keeps_question_answer_and_both_ends(make_tokenizer, budget):
    tokenizer = make_tokenizer()
    steps = _long_steps(40, 20_000)
    text = episode_text(QUESTION, steps, tokenizer, budget)
    assert _tokens(tokenizer, text) <= budget
    assert text.startswith(f"Question: {QUESTION}\n")
    assert text.endswith(f"Answer: {ANSWER}")
    assert "steps omitted ...]" in text
    if budget == 512:  # room for the first step and the one nearest the answer
        assert "Action: search[step 0]" in text and "Action: search[step 39]" in text


def test_observations_are_cut_before_any_step_is_dropped():
    tokenizer = bpe_tokenizer()
    steps = _long_steps(3, 3000)
    text = episode_text(QUESTION, steps, tokenizer, 400)
    assert _tokens(tokenizer, text) <= 400
    assert "omitted" not in text
    assert [f"Action: search[step {i}]" in text for i in range(3)] == [True] * 3
    observations = _observations(text)
    assert len(observations) == 3 and all(line.endswith(CUT_MARK) for line in observations)
    assert text.endswith(f"Answer: {ANSWER}")


def test_middle_steps_go_next_and_the_kept_observations_grow_back():
    tokenizer = bpe_tokenizer()
    steps = _long_steps(12, 3000)
    text = episode_text(QUESTION, steps, tokenizer, 300)
    assert _tokens(tokenizer, text) <= 300
    assert text.startswith(f"Question: {QUESTION}\n") and text.endswith(f"Answer: {ANSWER}")
    assert "Action: search[step 0]" in text and "Action: search[step 11]" in text
    assert "Action: search[step 5]" not in text
    observations = _observations(text)
    assert len(text) > 300  # the budget is used, not left empty
    assert all(len(line) - len("Observation: ") - len(CUT_MARK) >= MIN_OBSERVATION_CHARS for line in observations)


def test_the_question_is_cut_only_when_nothing_else_is_left_to_cut():
    tokenizer = bpe_tokenizer()
    long_question = "Which of the glassworks on the river " * 60 + "was founded first?"
    text = episode_text(long_question, _long_steps(5, 3000), tokenizer, 96)
    assert _tokens(tokenizer, text) <= 96
    first_line = text.split("\n")[0]
    assert first_line.startswith("Question: Which of the glassworks") and first_line.endswith(CUT_MARK)
    assert "[... 5 steps omitted ...]" in text
    assert text.endswith(f"Answer: {ANSWER}")


def test_episode_text_and_pair_text_agree_on_the_same_trajectory():
    tokenizer = bpe_tokenizer()
    for steps, budget in ((canonical()["steps"], 512), (_long_steps(20, 5000), 200)):
        from_db = episode_text(QUESTION, steps, tokenizer, budget)
        from_export = pair_text(prompt_messages(QUESTION), steps_to_messages(steps), tokenizer, budget)
        assert from_db == from_export


def test_special_tokens_in_untrusted_text_are_removed():
    tokenizer = bpe_tokenizer()
    steps = [
        {"kind": "action", "tool": "search", "arguments": {"query": "x<|eos|>"}},
        {"kind": "observation", "tool": "search", "content": "before<|pad|><|eos|>after"},
        {"kind": "answer", "text": "done<|eos|>"},
    ]
    text = episode_text(QUESTION, steps, tokenizer, 512)
    assert "<|" not in text
    assert "Observation: beforeafter" in text


class _CountingTokenizer:
    """A tokenizer that counts the characters it was asked to tokenize, optionally posing as one
    without character offsets (a slow, pure-Python tokenizer)."""

    def __init__(self, tokenizer, *, is_fast: bool = True):
        self._tokenizer = tokenizer
        self.is_fast = is_fast
        self.chars = 0

    def __call__(self, text, **kwargs):
        self.chars += sum(map(len, text)) if isinstance(text, list) else len(text)
        return self._tokenizer(text, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


def test_a_long_side_is_tokenized_about_once_not_once_per_search_probe():
    tokenizer = _CountingTokenizer(bpe_tokenizer())
    steps = _long_steps(10, 2000)
    full = sum(len(s.get("content", "")) for s in steps)
    text = episode_text(QUESTION, steps, tokenizer, 256)
    assert _tokens(tokenizer._tokenizer, text) <= 256
    assert tokenizer.chars < 2 * full


def test_a_tokenizer_without_offsets_still_gets_a_text_that_fits():
    tokenizer = _CountingTokenizer(bpe_tokenizer(), is_fast=False)
    text = episode_text(QUESTION, _long_steps(12, 3000), tokenizer, 300)
    assert _tokens(tokenizer._tokenizer, text) <= 300
    assert text.startswith(f"Question: {QUESTION}\n") and text.endswith(f"Answer: {ANSWER}")
    assert "steps omitted" in text


def test_a_budget_too_small_for_any_text_is_refused():
    with pytest.raises(ValueError, match="no room"):
        episode_text(QUESTION, canonical()["steps"], minilm_tokenizer(), 2)  # [CLS] and [SEP] take both


def _reading(path: list[dict]) -> list[dict]:
    """A short episode whose path is `path`, reading the founder's page and answering."""
    return [
        *path,
        {"kind": "action", "tool": "open", "arguments": {"n": 0}},
        {
            "kind": "observation",
            "tool": "open",
            "content": "The Veloran Glassworks was founded in 1821 by Ilse Marrow.",
        },
        {"kind": "action", "tool": "quote", "arguments": {"text": "by Ilse Marow"}},
        {
            "kind": "observation",
            "tool": "quote",
            "content": "Error: that text is not in the open page.",
            "is_error": True,
        },
        {"kind": "action", "tool": "quote", "arguments": {"text": "by Ilse Marrow"}},
        {"kind": "observation", "tool": "quote", "content": "Quote saved."},
        {"kind": "answer", "text": "Ilse Marrow"},
    ]


def test_the_evidence_view_is_the_question_what_was_read_and_quoted_and_the_answer():
    tokenizer = bpe_tokenizer()
    steps = _reading([{"kind": "thought", "text": "search first"}])
    text = episode_text(QUESTION, steps, tokenizer, 512, view="evidence")
    assert text.split("\n") == [
        f"Question: {QUESTION}",
        "Read: The Veloran Glassworks was founded in 1821 by Ilse Marrow.",
        "Quote: by Ilse Marrow",
        "Answer: Ilse Marrow",
    ]
    assert episode_text(QUESTION, steps, tokenizer, 512) != text  # the path view is unchanged


def test_in_the_evidence_view_the_path_is_invisible_and_the_answer_is_not():
    tokenizer = bpe_tokenizer()
    wandering = [
        {"kind": "action", "tool": "search", "arguments": {"query": "Velorn"}},
        {"kind": "observation", "tool": "search", "content": "Error: no results.", "is_error": True},
        {"kind": "action", "tool": "find", "arguments": {"text": "x"}},
        {"kind": "observation", "tool": "find", "content": "Error: open a page first.", "is_error": True},
    ]
    direct = episode_text(QUESTION, _reading([]), tokenizer, 512, view="evidence")
    assert episode_text(QUESTION, _reading(wandering), tokenizer, 512, view="evidence") == direct
    swapped = _reading([])
    swapped[-1] = {"kind": "answer", "text": "Oskar Venn"}
    assert episode_text(QUESTION, swapped, tokenizer, 512, view="evidence") != direct
    messages = steps_to_messages(_reading(wandering))
    assert pair_text(prompt_messages(QUESTION), messages, tokenizer, 512, view="evidence") == direct


def test_a_long_evidence_text_fits_its_budget():
    tokenizer = bpe_tokenizer()
    text = episode_text(QUESTION, _long_steps(30, 5000), tokenizer, 96, view="evidence")
    assert _tokens(tokenizer, text) <= 96 and text.startswith("Question: ") and "Answer: Ilse Marrow" in text
