"""Answer pairs (the same calls, different answers): how they are told apart, the derived ones
made from a decisive pair, and their weight in training."""

import math
from dataclasses import replace

import pytest
import torch

from annotate.chat_messages import QUOTES_HEADING, prompt_messages, steps_to_messages
from rewardmodel.answer_pairs import answer_text, derived_answer_pairs, is_answer_pair, tool_calls
from rewardmodel.scoring import RewardScorer
from rewardmodel.train import RewardModelConfig, pair_dataset, train_reward_model, weighted_pair_loss
from tests.rewardmodel.rm_fixtures import TINY
from tests.rewardmodel.synthetic import bpe_tokenizer, bpe_tokenizer_dir


def _side(searches: list[str], answer: str | None, quotes: tuple[str, ...] = ()) -> list[dict]:
    steps = []
    for query in searches:
        steps.append({"kind": "action", "tool": "search", "arguments": {"query": query}})
        steps.append({"kind": "observation", "tool": "search", "content": f"[0] {query} Guild"})
    if answer is not None:
        steps.append({"kind": "answer", "text": answer, "quotes": list(quotes)})
    return steps_to_messages(steps)


def _row(chosen: list[dict], rejected: list[dict], **extra) -> dict:
    return {
        "prompt": prompt_messages("Who founded the Karfus Guild?"),
        "chosen": chosen,
        "rejected": rejected,
        "margin": 1.0,
        "preferred": "A",
        **extra,
    }


def test_an_answer_pair_made_the_same_calls_in_any_order_and_answered_differently():
    a = _side(["Karfus", "Karfus Guild"], "Dreides Muband", quotes=("founded by Dreides Muband",))
    assert answer_text(a) == "Dreides Muband" and len(tool_calls(a)) == 2
    assert is_answer_pair(_row(a, _side(["Karfus Guild", "Karfus"], "Ilse Marrow")))
    # The same answer however it is spaced or cased, other calls, no call or no answer: not one.
    assert not is_answer_pair(_row(a, _side(["Karfus", "Karfus Guild"], "dreides  muband")))
    assert not is_answer_pair(_row(a, _side(["Karfus"], "Ilse Marrow")))
    assert not is_answer_pair(_row(_side([], "Dreides Muband"), _side([], "Ilse Marrow")))
    assert not is_answer_pair(_row(a, _side(["Karfus", "Karfus Guild"], None)))


def test_a_decisive_pair_with_different_answers_derives_the_winner_with_the_losers_answer():
    winner = _side(["Karfus Guild"], "Dreides Muband", quotes=("founded by Dreides Muband",))
    loser = _side(["Karfus"], "Ilse Marrow", quotes=("Ilse Marrow, a glassmaker",))
    rows = [
        _row(winner, loser),
        _row(winner, _side(["Karfus"], "Dreides Muband")),  # the same answer: the path decided
        _row(winner, loser, margin=0, preferred="tie"),  # no winner
        _row(winner, _side(["Karfus Guild"], "Ilse Marrow")),  # an answer pair already
        _row(winner, _side(["Karfus"], None)),  # the loser never answered
    ]
    kept, swapped = derived_answer_pairs(rows)  # only the first row derives, both directions
    assert kept["derived"] and swapped["derived"] and kept["margin"] == swapped["margin"] == 1.0
    # The winner over itself with the loser's answer: only the answer's text changed, the
    # winner's calls, pages read and quotes stay.
    assert kept["chosen"] == winner and kept["rejected"][:-1] == winner[:-1]
    assert kept["rejected"][-1]["content"] == "Ilse Marrow" + QUOTES_HEADING + "> founded by Dreides Muband"
    # The loser with the winner's answer over the loser.
    assert swapped["rejected"] == loser and swapped["chosen"][:-1] == loser[:-1]
    assert swapped["chosen"][-1]["content"] == "Dreides Muband" + QUOTES_HEADING + "> Ilse Marrow, a glassmaker"
    assert is_answer_pair(kept) and is_answer_pair(swapped)


def test_the_weighted_pair_loss_is_the_weighted_mean_of_trls_pair_loss():
    chosen, rejected = torch.tensor([2.0, 0.0, 1.0]), torch.tensor([0.0, 1.0, 1.0])
    margin, weight = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([3.0, 1.0, 1.0])
    each = [math.log1p(math.exp(-(c - r - m))) for c, r, m in zip([2.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0])]
    expected = (3 * each[0] + each[1] + each[2]) / 5
    assert weighted_pair_loss(chosen, rejected, margin, weight).item() == pytest.approx(expected)
    # Equal weights give TRL's own loss, the plain mean.
    assert weighted_pair_loss(chosen, rejected, margin, torch.ones(3)).item() == pytest.approx(sum(each) / 3)


def _mixed_rows() -> list[dict]:
    """Two answer pairs, one natural pair that derives two, one tie."""
    guild = _side(["Karfus Guild"], "Dreides Muband")
    return [
        _row(guild, _side(["Karfus Guild"], "Ilse Marrow")),
        _row(guild, _side(["Karfus Guild"], "Veloran")),
        _row(guild, _side(["Karfus"], "Ilse Marrow")),
        _row(guild, _side(["Karfus"], "Veloran"), margin=0, preferred="tie"),
    ]


def test_the_dataset_weighs_answer_pairs_and_adds_the_derived_ones_after_the_labelled_ones():
    tokenizer = bpe_tokenizer()
    plain = pair_dataset(_mixed_rows(), tokenizer, 128, True)
    assert len(plain) == 3 and "weight" not in plain.column_names  # the tie left out, nothing weighed
    data = pair_dataset(_mixed_rows(), tokenizer, 128, True, answer_pair_weight=4.0, derived=True)
    assert data["weight"] == [4.0, 4.0, 1.0, 4.0, 4.0]  # the derived pairs are answer pairs too
    assert data["chosen"][3] == data["chosen"][0] and "Answer: Ilse Marrow" in data["rejected"][3]


def test_a_model_trains_with_weighed_and_derived_answer_pairs(tmp_path):
    config = RewardModelConfig(
        tokenizer_dir=bpe_tokenizer_dir(),
        batch_size=2,
        epochs=1.0,
        checkpoint_every=0,
        answer_pair_weight=3.0,
        derived_answer_pairs=True,
        **TINY,
    )
    assert config.validate() == []
    result = train_reward_model(_mixed_rows(), config, tmp_path)
    assert (result.train_pairs, result.steps) == (5, 3)
    scores = RewardScorer(result.model_dir).score_episodes([("Who founded the Karfus Guild?", [])])
    assert math.isfinite(scores[0])
    assert "answer_pair_weight: must be positive." in replace(config, answer_pair_weight=0).validate()
