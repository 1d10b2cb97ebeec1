"""Votes on a comparison and their majority: one vocabulary and one rule (plain Python).

A vote is a choice on the 5-point scale in A/B terms (1 A much better, 2 A better, 3 tie,
4 B better, 5 B much better). Its direction is -1 (prefers A), 0 (tie) or +1 (prefers B),
named "A", "tie" and "B" (`SIDE`) wherever a side is written down.

The majority of some votes: a side wins when it has more votes than the other side and at
least as many as the ties; anything else (A and B level, or more ties than either) is a tie.
So A, A, tie, tie is A: two people preferred A and nobody preferred B. This is the label the
reward model learns from (the dataset's `majority` aggregation), the label a judge is scored
against on the agreement page, the label of the loop's audit and the one each annotator is
compared with on the quality page: one rule, so those figures are about the same labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

A, TIE, B = -1, 0, 1
SIDE = {A: "A", TIE: "tie", B: "B"}
DIRECTION = {name: d for d, name in SIDE.items()}


def direction(choice: int) -> int:
    """-1 prefers A, 0 tie, +1 prefers B."""
    return (choice > 3) - (choice < 3)


def side(choice: int) -> str:
    """'A', 'tie' or 'B': the side a 5-point choice prefers."""
    return SIDE[direction(choice)]


def majority(directions: Iterable[int]) -> int | None:
    """The majority direction of some votes' directions (the rule above); None with no votes."""
    counts = Counter(directions)
    if not counts:
        return None
    a, b, tie = counts[A], counts[B], counts[TIE]
    if a > b and a >= tie:
        return A
    if b > a and b >= tie:
        return B
    return TIE


def majority_of_choices(choices: Iterable[int]) -> int | None:
    """The majority direction of some 5-point choices; None with no votes."""
    return majority(direction(c) for c in choices)
