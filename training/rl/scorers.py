"""Scorers: one number per finished episode, higher is better (plain Python, no Django).

PPO, best-of-n and evaluation all read episodes through a scorer: a trained reward model
(the loop's real signal), or the rubric itself (the upper bound, which no learnt model
can beat on its own metric).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rewardmodel.scoring import RewardScorer

Scorer = Callable[[Sequence], list[float]]  # finished RolloutEpisodes -> one score each


def rubric_scorer(*, utility: bool = False) -> Scorer:
    """1 for a correct answer, else 0; or the rubric's utility (steps, tool errors and loops count)."""

    def score(episodes) -> list[float]:
        return [float(e.outcome.utility) if utility else float(e.outcome.correct) for e in episodes]

    return score


def episode_steps(episode) -> list[dict]:
    """The canonical steps of a rollout episode, as stored and as the reward model read them in training."""
    return episode.trajectory(agent="policy")["steps"]


def reward_model_scorer(model_dir: str | Path, *, device: str = "cpu", ensemble_penalty: float = 0.0) -> Scorer:
    """Scores from a trained reward model directory. For an ensemble: the members' mean minus
    `ensemble_penalty` times their spread (standard deviation), a conservative reward that
    gives less for what the members disagree on (Coste et al., ICLR 2024)."""
    reward_model = RewardScorer(model_dir, device=device)

    def score(episodes) -> list[float]:
        texts = reward_model.episode_texts([(e.task.prompt, episode_steps(e)) for e in episodes])
        return conservative(reward_model.member_scores(texts), ensemble_penalty)

    return score


def conservative(by_member: list[list[float]], penalty: float) -> list[float]:
    """Per item, the members' mean minus `penalty` times their (population) standard deviation."""
    out = []
    for scores in zip(*by_member):
        mean = sum(scores) / len(scores)
        spread = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
        out.append(mean - penalty * spread)
    return out
