"""From votes to a preference: aggregation rules and the task split (plain Python).

Votes are choices on the 5-point scale in A/B terms (1 A much better .. 3 tie .. 5 B much
better).

- `majority`: the one majority rule of `core.votes` (a side wins with more votes than the
  other side and at least as many as the ties; else a tie). Margin = (votes for the winner -
  votes for the other side) / votes, in [0, 1].
- `mean`: s = mean of (3 - choice) over the votes, in [-2, 2]; A wins when s > 0, B when
  s < 0, tie at 0. Margin = |s|, in [0, 2]: "much better" counts double.
Agreement = share of votes on the winning side (for a tie, the share of tie votes).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

from core.votes import SIDE, direction, majority

RULES = ("majority", "mean")
# What a snapshot needs for a reward model to be trained and tested on it: pairs that are not
# ties in each split (rewardmodel/services.py checks a run against it; the snapshot page warns).
MIN_TRAIN_PAIRS = 16
MIN_TEST_PAIRS = 4


def can_train_reward_model(counts: tuple[int, int]) -> bool:
    """Whether (train, test) pairs that are not ties are enough to train and test a reward model."""
    return counts[0] >= MIN_TRAIN_PAIRS and counts[1] >= MIN_TEST_PAIRS


def reward_model_pairs(stats: dict | None) -> tuple[int, int]:
    """(train, test) pairs that are not ties, from a snapshot's stored statistics."""
    stats = stats or {}
    return (
        stats.get("train_pairs", 0) - stats.get("train_ties", 0),
        stats.get("test_pairs", 0) - stats.get("test_ties", 0),
    )


@dataclass(frozen=True)
class Preference:
    preferred: str  # "A", "B" or "tie"
    margin: float
    votes: int
    agreement: float


def aggregate(choices: list[int], rule: str, *, adjudicated: int | None = None) -> Preference:
    """Aggregate one comparison's votes. An adjudicated label, where one exists, decides the side."""
    if not choices:
        raise ValueError("a comparison needs at least one vote")
    counts = Counter({"A": 0, "B": 0, "tie": 0})
    for c in choices:
        counts[SIDE[direction(c)]] += 1
    n = len(choices)
    if adjudicated is not None:
        preferred = SIDE[direction(adjudicated)]
        margin = 1.0 if rule == "majority" else float(abs(3 - adjudicated))
        if preferred == "tie":
            margin = 0.0
        return Preference(preferred, margin, n, counts[preferred] / n)
    if rule == "majority":
        preferred = SIDE[majority(direction(c) for c in choices)]
        margin = 0.0 if preferred == "tie" else abs(counts["A"] - counts["B"]) / n
    elif rule == "mean":
        score = sum(3 - c for c in choices) / n
        preferred = "A" if score > 0 else ("B" if score < 0 else "tie")
        margin = abs(score)
    else:
        raise ValueError(f"unknown aggregation rule {rule!r}")
    return Preference(preferred, round(margin, 6), n, round(counts[preferred] / n, 6))


def task_split(external_id: str, *, seed: int, test_fraction: float) -> str:
    """'train' or 'test' for a task, from a hash of the seed and its id: stable, and never both."""
    digest = hashlib.sha256(f"{seed}:{external_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if u < test_fraction else "train"


# Whose votes a snapshot holds (its `feedback` filter, the words of the exports' `source` column), and
# which of its pairs a reward model trains on. "human" is annotators': people's, and simulated
# annotators' where the snapshot includes synthetic judgements (each row's `labelled_by` tells them apart).
FEEDBACK = ("human", "ai", "both")
FEEDBACK_WORDS = {
    "human": "annotators' votes",
    "ai": "judges' votes (AI feedback)",
    "both": "every pair of the snapshot",
}


def fed_by(source: str, feedback: str) -> bool:
    """Whether a pair of this source (human or ai) belongs to this feedback choice."""
    return feedback == "both" or source == feedback
