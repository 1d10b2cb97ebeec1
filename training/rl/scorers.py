"""Scorers: one number per finished episode, higher is better (plain Python, no Django).

PPO, best-of-n and evaluation all read episodes through a scorer: a trained reward model
(the loop's real signal), or the rubric itself (the upper bound, which no learnt model
can beat on its own metric).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

Scorer = Callable[[Sequence], list[float]]  # finished RolloutEpisodes -> one score each


def rubric_scorer(*, utility: bool = False) -> Scorer:
    """1 for a correct answer, else 0; or the rubric's utility (steps, tool errors and loops count)."""
    def score(episodes) -> list[float]:
        return [float(e.outcome.score) if utility else float(e.outcome.correct) for e in episodes]
    return score


def episode_steps(episode) -> list[dict]:
    """The canonical steps of a rollout episode, as stored and as the reward model read them in training."""
    return episode.trajectory(agent="policy")["steps"]


def reward_model_scorer(model_dir: str | Path, *, device: str = "cpu") -> Scorer:
    """Scores from a trained reward model directory."""
    from rewardmodel.scoring import RewardScorer

    reward_model = RewardScorer(model_dir, device=device)

    def score(episodes) -> list[float]:
        return reward_model.score_episodes([(e.task.prompt, episode_steps(e)) for e in episodes])
    return score
