"""Votes of the judges that need no chat model, in plain Python: a reward model's scores and
an environment's rubric, each turned into a choice on the 5-point scale (A/B terms).

- Reward model: P(A is better) = sigmoid(score A - score B), the Bradley-Terry reading its
  training gives the margin; "much better" at P >= 0.9 (or <= 0.1), "better" otherwise,
  a tie only when the scores are equal.
- Rubric: a correct answer against a wrong one is "much better" (the known answer decides);
  otherwise the higher rubric utility (fewer steps, tool errors, loops) is "better", or
  "much better" at a gap of 8 or more (the simulated annotators' `much_better_gap`); equal
  utilities are a tie. Without stored outcomes, the final answers against the task's
  reference answer (normalized exact match): right against wrong is "much better", two of a
  kind a tie. Nothing known: no vote.
"""

from __future__ import annotations

import math

from training.envs.answers import normalize

MUCH_BETTER_PROBABILITY = 0.9
MUCH_BETTER_GAP = 8.0


def reward_model_vote(score_a: float, score_b: float) -> tuple[int, float]:
    """(choice, P(A is better)) from the two scores."""
    z = max(-60.0, min(60.0, score_a - score_b))
    p = 1.0 / (1.0 + math.exp(-z))
    if score_a == score_b:
        return 3, 0.5
    if p >= 0.5:
        return (1 if p >= MUCH_BETTER_PROBABILITY else 2), p
    return (5 if p <= 1 - MUCH_BETTER_PROBABILITY else 4), p


def _correct(outcome: dict | None, answer: str, reference: str) -> bool | None:
    if isinstance(outcome, dict) and isinstance(outcome.get("correct"), bool):
        return outcome["correct"]
    if normalize(reference or ""):
        return normalize(answer or "") == normalize(reference)
    return None


def _utility(outcome: dict | None) -> float | None:
    value = (outcome or {}).get("utility") if isinstance(outcome, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rubric_vote(
    *, outcome_a: dict | None, outcome_b: dict | None, answer_a: str, answer_b: str, reference: str
) -> tuple[int, bool] | None:
    """(choice, both_bad) by the rubric, or None when neither outcomes nor the answer are known."""
    correct_a, correct_b = _correct(outcome_a, answer_a, reference), _correct(outcome_b, answer_b, reference)
    both_bad = correct_a is False and correct_b is False
    if correct_a is not None and correct_b is not None and correct_a != correct_b:
        return (1 if correct_a else 5), False
    utility_a, utility_b = _utility(outcome_a), _utility(outcome_b)
    if utility_a is not None and utility_b is not None:
        gap = utility_a - utility_b
        if gap == 0:
            return 3, both_bad
        strong = abs(gap) >= MUCH_BETTER_GAP
        return ((1 if strong else 2) if gap > 0 else (5 if strong else 4)), both_bad
    if correct_a is not None and correct_b is not None:
        return 3, both_bad
    return None
