"""Disagreement-first routing: which comparisons people should see first (plain Python).

A comparison's judges (reward models, rubrics, chat models: `JudgeVote` rows) say what they
think before people do. People are worth most where the judges cannot settle it:

- the judges disagree with each other (the reward model included): +2;
- a judge changed its mind when asked again or with the sides swapped: +1;
- the reward model is unsure: + (1 - |2p - 1|), p its probability that A is better
  (1 when it cannot tell, 0 when it is sure); the least sure of the reward models counts.

A comparison no judge has voted on gets 0.5 (as unsure as a coin), so it comes after the
disputed and unsure ones and before those every judge agrees on with confidence. The same
function orders a campaign's queue (`annotate/judges/votes.py`) and the simulation that
measures what the ordering saves (`benchmarks/judge_routing.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNJUDGED = 0.5


@dataclass(frozen=True)
class JudgedComparison:
    directions: list[int] = field(default_factory=list)  # each judge's first answer: -1 A, 0 tie, +1 B
    probabilities: list[float] = field(default_factory=list)  # reward models' P(A is better)
    unstable: bool = False  # a probe (asked again, or with the sides swapped) disagreed with the first answer


def disagreement_priority(judged: JudgedComparison | None) -> float:
    """The queue priority of a comparison (higher: offered to people first)."""
    if judged is None or (not judged.directions and not judged.probabilities):
        return UNJUDGED
    score = 0.0
    if len(set(judged.directions)) > 1:
        score += 2.0
    if judged.unstable:
        score += 1.0
    if judged.probabilities:
        score += max(1.0 - abs(2.0 * p - 1.0) for p in judged.probabilities)
    return score
