"""The answer-swap probe on hand-built pairs: a reward model that checks the answer against what
the agent read passes it, one that scores only the path sits at chance."""

import pytest

from core.intervals import share_interval
from rewardmodel.probes import Probed, answer_swap_accuracy, answer_swap_pairs


def _trajectory(task: str, answer: str, correct: bool, quote: str) -> Probed:
    steps = [
        {"kind": "action", "tool": "search", "arguments": {"query": task}, "call_id": "call_0"},
        {"kind": "observation", "tool": "search", "call_id": "call_0", "content": "[0] " + task},
        {"kind": "action", "tool": "quote", "arguments": {"text": quote}, "call_id": "call_1"},
        {"kind": "observation", "tool": "quote", "call_id": "call_1", "content": "Quoted."},
        {"kind": "answer", "text": answer},
    ]
    return Probed(task=task, prompt=f"Who founded the {task}?", steps=steps, correct=correct)


TRAJECTORIES = [
    _trajectory("Komthae Works", "Ferseim Daekgor", True, "by Ferseim Daekgor"),
    _trajectory("Komthae Works", "Ilse Marrow", False, "by Ferseim Daekgor"),
    _trajectory("Dravel Guild", "Ouk Stan", True, "by Ouk Stan"),
    _trajectory("Dravel Guild", "Ferseim Daekgor", False, "by Ilse Marrow"),
    _trajectory("Lonely Society", "Nobody", False, "x"),  # no right answer on its task: no pair
]


class Checks:
    """Prefers an answer that the agent's quote supports."""

    def score_episodes(self, items):
        def score(steps):
            quotes = " ".join(s["arguments"]["text"] for s in steps if s["kind"] == "action" and s["tool"] == "quote")
            answer = next(s["text"] for s in steps if s["kind"] == "answer")
            return 1.0 if answer in quotes else 0.0

        return [score(steps) for _, steps in items]


class PathOnly:
    """Scores the number of steps: blind to the answer."""

    def score_episodes(self, items):
        return [float(len(steps)) for _, steps in items]


def test_swapped_pairs_differ_only_in_the_final_answer_both_ways():
    pairs = answer_swap_pairs(TRAJECTORIES)
    assert len(pairs) == 4  # each trajectory of the two tasks with a right and a wrong answer
    for prompt, right, wrong in pairs:
        assert right[:-1] == wrong[:-1] and right[-1]["text"] != wrong[-1]["text"]
    answers = {(p, r[-1]["text"], w[-1]["text"]) for p, r, w in pairs}
    assert ("Who founded the Komthae Works?", "Ferseim Daekgor", "Ilse Marrow") in answers
    assert all(r[-1]["text"] in ("Ferseim Daekgor", "Ouk Stan") for _, r, _ in pairs)


def test_a_model_that_checks_the_answer_passes_and_one_that_reads_only_the_path_is_at_chance():
    pairs = answer_swap_pairs(TRAJECTORIES)
    checks = answer_swap_accuracy(Checks(), pairs)
    blind = answer_swap_accuracy(PathOnly(), pairs)
    # The pair whose quote supports neither answer (Dravel's wrong trajectory) ties for both models.
    assert checks["n"] == 4 and checks["accuracy"] == (1 + 1 + 1 + 0.5) / 4
    # Four ties are a share of 2 in 4: its interval is Wilson's over four pairs, not a certain 0.5.
    assert blind["accuracy"] == 0.5 and blind["accuracy_ci"] == pytest.approx(list(share_interval(2, 4)))
    assert answer_swap_accuracy(Checks(), [])["accuracy"] is None
