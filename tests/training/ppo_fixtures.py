"""Rewards whose preference is known: a reward model built by hand (no training) and a scorer,
so a PPO test knows the score can be raised and what raises it; and what a data-parallel test
run's processes build for themselves."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from training.envs.base import EpisodeRunner


def low_token_reward_model(path: Path, tokenizer_dir: str | Path, *, below: int = 200) -> Path:
    """A one-layer Llama reward model scoring a text by the share of its tokens with an id below
    `below`: every token writes +1 or -1 in one direction of the residual stream, the end token
    attends evenly to all of them (queries are zero), and the score head reads that direction."""
    import torch

    from rewardmodel.backbones import build_backbone

    if (path / "config.json").exists():
        return path
    model, tokenizer = build_backbone(
        SimpleNamespace(
            backbone="policy-llama", tokenizer_dir=str(tokenizer_dir), hidden=32, layers=1, heads=2, max_length=2048
        )
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed.copy_(0.1 * torch.randn(embed.shape, generator=generator))
        embed[:, 0] = torch.where(torch.arange(embed.size(0)) < below, 1.0, -1.0)
        for special in {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}:
            embed[special, 0] = 0.0
        layer = model.model.layers[0]
        for weight in (
            layer.self_attn.q_proj.weight,
            layer.self_attn.k_proj.weight,
            layer.mlp.down_proj.weight,
            layer.self_attn.v_proj.weight,
            layer.self_attn.o_proj.weight,
            model.score.weight,
        ):
            weight.zero_()
        for weight in (layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, model.score.weight):
            weight[0, 0] = 1.0
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def token_share_scorer(below: int):
    """The share of the agent's tokens with an id below `below`: a reward any policy can raise by
    moving probability onto those tokens."""

    def score(episodes):
        return [
            sum(1 for t, m in zip(e.ids, e.agent_mask) if m and t < below) / max(1, e.agent_tokens) for e in episodes
        ]

    return score


def encyclopedia_inputs(below: int, dev: int) -> dict:
    """The scorer, tasks and runners of a test RL run in the encyclopedia (training/rl/rl_rank.py
    builds them in each process of a data-parallel run from this function's name)."""
    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment

    env = get_environment("encyclopedia")
    runner = EpisodeRunner(env)
    return {
        "scorer": token_share_scorer(below),
        "train_tasks": env.tasks("train"),
        "runner": runner,
        "dev_tasks": env.tasks("dev")[:dev],
        "dev_runner": runner,
    }


# No tool-error shaping: an untrained policy's turns are mostly errors, and these tests read the scorer's own score.
FAST = dict(
    episodes_per_iteration=8,
    minibatch_size=4,
    epochs=2,
    eval_every=0,
    rollout_batch_size=8,
    seed=0,
    tool_error_penalty=0.0,
)


class World:
    """An environment's tasks by split, and a runner for its episodes."""

    def __init__(self, env):
        self.env, self.runner = env, EpisodeRunner(env)

    def split(self, name: str, limit: int = 0) -> list:
        tasks = self.env.tasks(name)
        return tasks[:limit] if limit else tasks
