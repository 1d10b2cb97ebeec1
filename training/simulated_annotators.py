"""Simulated annotators in the style of AlpacaFarm (plain Python).

Each annotator prefers trajectory A over B with probability sigmoid((u_A - u_B) / T), a
Bradley-Terry draw over the rubric utilities at temperature T; then flips its label with
probability `flip`; and with probability `position_bias` simply picks the side shown on
the left. The strength of the verdict (better / much better) follows the utility gap;
equal utilities give a tie unless `break_ties`.

What an annotator values is what the reward model learns, so the default judges as a
person checking answers would: **correctness first** (`correct_first`): a correct answer
beats any wrong one, and steps, tool errors and loops (`weights`, the rubric's by default)
decide between trajectories that are equally correct. Two wrong answers are marked both
bad, and `wrong_pairs` says how they are told apart: by everything, steps included
("steps", the default here), by tool errors and loops only ("errors"), or not at all ("tie",
the loop's default). Telling wrong answers apart by their length teaches a reward model
that a short wrong guess beats a long wrong search, which RL then exploits; by their
errors, that a short wrong answer (fewer calls, fewer chances to fail) beats a careful one
(benchmarks/RESULTS.md, issue 26).

Without `correct_first` an annotator judges by a single utility: its own `weights`
recomputed from the outcome's parts, or the utility stored with the trajectory; under the
rubric's +10 for a correct answer a two-step wrong guess is worth about as much as a
careful correct search, and a policy trained on such labels learns to guess (docs/agent.md).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from training.envs.utility import RubricWeights
from training.envs.utility import utility as rubric_utility

WRONG_PAIRS = ("steps", "errors", "tie")
CORRECT_FIRST_BONUS = 1000.0  # above anything steps, tool errors and loops can add up to


@dataclass(frozen=True)
class AnnotatorProfile:
    temperature: float = 1.0
    flip: float = 0.0
    position_bias: float = 0.0
    much_better_gap: float = 8.0
    break_ties: bool = False
    weights: RubricWeights | None = None  # judge by these utility weights (None: the stored utility)
    correct_first: bool = True  # a correct answer beats any wrong one; the weights break ties within each
    wrong_pairs: Literal["steps", "errors", "tie"] = (
        "steps"  # with correct_first: what tells two wrong answers apart (steps, errors and loops; errors and loops; nothing)
    )

    def utility(self, outcome: dict) -> float | None:
        """The utility this annotator sees in a stored outcome (None when it cannot tell)."""
        if self.correct_first:
            if "correct" not in outcome:
                return None
            if not outcome["correct"] and self.wrong_pairs == "tie":
                return 0.0
            steps = outcome.get("steps", 0) if outcome["correct"] or self.wrong_pairs == "steps" else 0
            efficiency = rubric_utility(  # the rubric's costs, without its points for being right
                correct=False,
                steps=steps,
                tool_errors=outcome.get("tool_errors", 0),
                loop=bool(outcome.get("loop", False)),
                weights=self.weights or RubricWeights(),
            )
            return CORRECT_FIRST_BONUS * bool(outcome["correct"]) + efficiency
        if self.weights is None:
            return outcome.get("utility")
        if any(key not in outcome for key in ("correct", "steps", "tool_errors", "loop")):
            return None
        return rubric_utility(
            correct=bool(outcome["correct"]),
            steps=outcome["steps"],
            tool_errors=outcome["tool_errors"],
            loop=bool(outcome["loop"]),
            weights=self.weights,
        )

    def both_bad(self, outcome_a: dict, outcome_b: dict) -> bool:
        """Whether this annotator marks a pair "both bad": two wrong answers, when it checks answers."""
        return self.correct_first and all("correct" in o and not o["correct"] for o in (outcome_a, outcome_b))

    def validate(self) -> None:
        if self.wrong_pairs not in WRONG_PAIRS:
            raise ValueError(f"wrong_pairs must be one of {', '.join(WRONG_PAIRS)}")
        if self.temperature < 0:
            raise ValueError("temperature must be at least 0")
        for name in ("flip", "position_bias"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")


def simulated_choice(
    *, utility_a: float, utility_b: float, left_is_a: bool, profile: AnnotatorProfile, rng: random.Random
) -> int:
    """A choice on the 5-point scale in A/B terms (1 A much better .. 5 B much better)."""
    gap = utility_a - utility_b
    strong = abs(gap) >= profile.much_better_gap
    if rng.random() < profile.position_bias:
        prefers_a = left_is_a
        strong = False  # a pick by position is not a considered "much better"
    elif gap == 0 and not profile.break_ties:
        return 3
    else:
        if profile.temperature == 0:
            prefers_a = gap > 0 if gap != 0 else rng.random() < 0.5
        else:
            z = max(-60.0, min(60.0, gap / profile.temperature))
            prefers_a = rng.random() < 1 / (1 + math.exp(-z))
        if rng.random() < profile.flip:
            prefers_a = not prefers_a
    if prefers_a:
        return 1 if strong else 2
    return 5 if strong else 4
