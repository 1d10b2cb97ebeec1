"""The rubric: an oracle score of a finished episode from the known answer.

Correctness is normalized exact match (lower case, no accents, no punctuation of any script,
no articles, single spaces) with token F1 beside it; quote support means a quote taken from an opened page
contains the reference answer. Utility weights follow agent RL practice: +10 correct,
-1 per step, -5 per tool error, -10 for a loop. It drives evaluation and simulated
annotators and is never shown to human annotators.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from training.envs.answers import normalize, token_f1
from training.envs.utility import RubricWeights, utility


@dataclass(frozen=True)
class Outcome:
    correct: bool
    f1: float
    quote_support: bool
    steps: int
    tool_errors: int
    loop: bool
    answered: bool
    utility: float

    def as_dict(self) -> dict:
        return asdict(self)


def score(
    *,
    answer: str | None,
    reference: str,
    quotes: list[str],
    opened: list[str],
    steps: int,
    tool_errors: int,
    loop: bool,
    weights: RubricWeights = RubricWeights(),
) -> Outcome:
    given = answer or ""
    correct = answer is not None and normalize(given) == normalize(reference) and bool(normalize(reference))
    ref = normalize(reference)
    supported = any(ref and ref in normalize(q) and any(q in page for page in opened) for q in quotes)
    value = utility(correct=correct, steps=steps, tool_errors=tool_errors, loop=loop, weights=weights)
    return Outcome(
        correct=correct,
        f1=round(token_f1(given, reference), 4),
        quote_support=supported,
        steps=steps,
        tool_errors=tool_errors,
        loop=loop,
        answered=answer is not None,
        utility=value,
    )


def score_episode(episode, reference: str, weights: RubricWeights = RubricWeights()) -> Outcome:
    return score(
        answer=episode.answer,
        reference=reference,
        quotes=episode.quotes,
        opened=episode.opened,
        steps=len(episode.actions),
        tool_errors=episode.tool_errors,
        loop=episode.loop,
        weights=weights,
    )
