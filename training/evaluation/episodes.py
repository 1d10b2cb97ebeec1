"""Before/after evaluation of systems on held-out tasks (plain Python, torch and numpy).

A system is a policy, or best-of-n over a policy (sample n, keep the one the reward model
scores highest). Each is played on the same tasks: `samples` sampled episodes per task at
the temperature (and optionally one greedy episode), and every figure is a mean over tasks
with a 95% percentile-bootstrap interval that resamples tasks (so several samples of one
task count as one unit, not as independent draws).

Figures per episode: the rubric's (training/evaluation/metrics.py: success, utility, steps,
tool errors, and the environment's own parts such as the encyclopedia's F1 and quote
support), the reward model's score, and the KL to the reference (starting) policy,
log pi - log pi_ref summed over the agent's tokens of a sampled episode (its mean over
episodes estimates KL(pi || pi_ref) per episode). Best-of-n's KL is the analytic
log n - (n-1)/n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.intervals import RESAMPLES, bootstrap
from training.evaluation.metrics import SHARES, episode_figures
from training.rl.episode_tensors import episode_batch, forward_agent_tokens, token_logprobs

METRICS = ("success", "utility", "f1", "quote_support", "steps", "tool_errors", "rm_score", "kl")


@dataclass
class Played:
    """One system's episodes on the tasks: `episodes[t][s]` is sample s of task t."""

    episodes: list[list]
    rm_scores: list[list[float]] | None = None
    kls: list[list[float]] | None = None


def best_of_n_kl(n: int) -> float:
    """KL(best-of-n || policy) for n independent samples (Gao et al. 2022)."""
    return math.log(n) - (n - 1) / n


def play(
    model,
    tokenizer,
    runner,
    tasks: list,
    *,
    samples: int,
    temperature: float,
    seed: int,
    batch_size: int = 64,
    progress=None,
    chat=None,
    limits: dict | None = None,
) -> list[list]:
    """`limits`: the rollout's max_action_tokens and max_context, when not the defaults."""
    # Lazy: training.policy.rollout loads torch, which the web process (it imports this module) never does.
    from training.policy.rollout import RolloutConfig, rollout

    """`samples` episodes per task; episode s of task t has its own seed, so a rerun gives the same."""

    repeated = [task for task in tasks for _ in range(samples)]
    seeds = [seed * 1_000_003 + t * 1000 + s for t in range(len(tasks)) for s in range(samples)]
    episodes = rollout(
        model,
        tokenizer,
        runner,
        repeated,
        RolloutConfig(temperature=temperature, batch_size=batch_size, **(limits or {})),
        seeds=seeds,
        progress=progress,
        chat=chat,
    )
    return [episodes[t * samples : (t + 1) * samples] for t in range(len(tasks))]


def episode_kls(
    episodes: list, model, reference, tokenizer, *, temperature: float, batch_size: int = 16
) -> list[float]:
    """log pi - log pi_ref summed over each episode's agent tokens, both at the sampling temperature."""
    import torch

    device = next(model.parameters()).device
    kls = []
    with torch.no_grad():
        for start in range(0, len(episodes), batch_size):
            batch = episode_batch(episodes[start : start + batch_size], tokenizer.pad_token_id, device)
            logits, _ = forward_agent_tokens(model, None, batch, temperature)
            ref_logits, _ = forward_agent_tokens(reference, None, batch, temperature)
            difference = (token_logprobs(logits, batch.tokens) - token_logprobs(ref_logits, batch.tokens)) * batch.mask
            kls += difference.sum(1).tolist()
    return kls


def best_of_n(played: Played, n: int, *, group: int | None = None) -> Played:
    """Per task, for each group of `group` consecutive samples (n unless given), the best of the
    group's first n by reward-model score.

    Group g is samples g*group .. g*group+group-1, so best-of-1 (the plain policy), best-of-2
    and best-of-4 over the same samples are nested, as in the papers' curves.
    """
    group = group or n
    if played.rm_scores is None and n > 1:
        raise ValueError("best-of-n needs reward-model scores")
    if not 1 <= n <= group:
        raise ValueError("n must be between 1 and the group size")
    chosen, scores = [], []
    for t, episodes in enumerate(played.episodes):
        task_scores = played.rm_scores[t] if played.rm_scores is not None else [0.0] * len(episodes)
        picks = [
            start + max(range(n), key=lambda i: task_scores[start + i])
            for start in range(0, len(episodes) - group + 1, group)
        ]
        chosen.append([episodes[i] for i in picks])
        scores.append([task_scores[i] for i in picks])
    return Played(
        episodes=chosen,
        rm_scores=scores if played.rm_scores is not None else None,
        kls=[[best_of_n_kl(n)] * len(c) for c in chosen],
    )


def episode_values(played: Played) -> dict[str, list[list[float]]]:
    """Per metric, its value for every episode, grouped by task."""
    figures = [[episode_figures(e) for e in episodes] for episodes in played.episodes]
    names = [m for m in METRICS if any(m in f for task in figures for f in task)]
    values = {name: [[f[name] for f in task if name in f] for task in figures] for name in names}
    if played.rm_scores is not None:
        values["rm_score"] = played.rm_scores
    if played.kls is not None:
        values["kl"] = played.kls
    return values


def task_bootstrap(
    per_task: list[list[float]], *, resamples: int = RESAMPLES, seed: int = 0, share: bool | None = None
) -> dict:
    """{mean, low, high, tasks, episodes}: the mean over tasks of each task's mean, with the one
    interval of every figure (core/intervals.py `bootstrap`, over tasks; a share's at least
    Wilson's: `share` as `bootstrap` takes it)."""
    result = bootstrap(per_task, resamples=resamples, seed=seed, share=share)
    return {
        "mean": result["mean"],
        "low": result["low"],
        "high": result["high"],
        "tasks": result["units"],
        "episodes": result["values"],
    }


def summarize(played: Played, *, seed: int = 0) -> dict[str, dict]:
    """Every metric of a played system: {metric: {mean, low, high, tasks, episodes}}."""
    return {
        name: task_bootstrap(values, seed=seed, share=name in SHARES) for name, values in episode_values(played).items()
    }


def paired_difference(a: list[list[float]], b: list[list[float]], *, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """Mean over tasks of (b - a) with a 95% bootstrap interval over tasks (the same tasks resampled
    for both): tighter than comparing two separate intervals, since task difficulty cancels."""
    differences = [[float(np.mean(y) - np.mean(x))] for x, y in zip(a, b) if x and y]
    return task_bootstrap(differences, resamples=resamples, seed=seed, share=False)  # a difference, not a share
