"""Does RL learn what it is paid for? PPO, RLOO and GRPO against the rubric in an environment
with a known optimum (training/envs/codeword.py: 100% success in two steps), from a policy
behaviour-cloned on a demonstrator that is right about 40% of the time.

The check is on held-out tasks, greedy and at T=1, with the last checkpoint (no choice by
dev): the machinery must take the start to near the optimum within a stated budget. A
wrong advantage sign drives success down, an action mask off by one or a value baseline
that does not track the returns stalls it, and a KL term of the wrong sign lets the policy
run off; `benchmarks/rl_sanity.py --mutate ...` shows which of these the check catches.

Plain Python and torch, no Django:

    .venv/bin/python -m training.rl.sanity --algorithm ppo [--out /tmp/sanity]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.callbacks import RLCallbacks
from core.configs import add_config_arguments, config_from_arguments
from training.envs.base import EpisodeRunner
from training.envs.registry import get_environment
from training.policy.bc import demonstration_texts, demonstrations, play_demonstrations, train_bc
from training.policy.bc_config import BCConfig
from training.policy.chat import ChatFormat
from training.policy.layout import TOOL_PARSER
from training.policy.model_io import build_model, load_policy, save_policy, train_tokenizer
from training.policy.success_rates import success_rates
from training.rl.config import RLConfig
from training.rl.scorers import rubric_scorer
from training.rl.trainer import train_rl

ENVIRONMENT = "codeword"


@dataclass
class SanityConfig:
    """The known-optimum check's budget: the start, then RL, both bounded by steps."""

    bc_steps: int = field(default=1000, metadata={"help": "behaviour-cloning steps of the start"})
    hidden: int = field(default=64, metadata={"help": "width of the start's model"})
    layers: int = field(default=2, metadata={"help": "transformer blocks of the start's model"})
    iterations: int = field(default=30, metadata={"help": "RL iterations (about a minute on one core)"})
    episodes_per_iteration: int = field(default=48, metadata={"help": "episodes per RL batch"})
    learning_rate: float = field(default=3e-4, metadata={"help": "RL learning rate"})
    eval_tasks: int = field(default=60, metadata={"help": "held-out tasks of the check (greedy and T=1 each)"})
    seed: int = field(default=0, metadata={"help": "the start's seed and RL's"})
    threads: int = field(default=1, metadata={"help": "torch threads"})


def bc_start(out_dir: str | Path, config: SanityConfig) -> Path:
    """The behaviour-cloned start in `out_dir` (built once: an existing one is reused)."""
    import torch

    path = Path(out_dir)
    if (path / "config.json").exists():
        return path
    torch.set_num_threads(config.threads)
    bc = BCConfig(
        environment=ENVIRONMENT,
        demos_per_task=2,
        extra_worlds=0,
        vocab_size=400,
        hidden=config.hidden,
        layers=config.layers,
        heads=2,
        learning_rate=1e-3,
        warmup_steps=100,
        max_steps=config.bc_steps,
        budget_seconds=0,
        threads=config.threads,
        seed=config.seed,
    )
    env = get_environment(ENVIRONMENT)
    played = play_demonstrations(env, bc, parser=TOOL_PARSER)
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=bc.vocab_size)
    chat = ChatFormat.for_policy(tokenizer, parser=TOOL_PARSER)
    model = build_model(tokenizer, hidden=bc.hidden, layers=bc.layers, heads=bc.heads, seed=bc.seed)
    train_bc(model, tokenizer, demonstrations(chat, played), bc)
    return save_policy(model, tokenizer, path)


def rl_config(algorithm: str, config: SanityConfig, **overrides) -> RLConfig:
    """The RL settings of the check: the product's defaults but for the budget."""
    return replace(
        RLConfig(
            algorithm=algorithm,
            iterations=config.iterations,
            episodes_per_iteration=config.episodes_per_iteration,
            minibatch_size=16,
            learning_rate=config.learning_rate,
            eval_every=0,
            rollout_batch_size=config.episodes_per_iteration,
            seed=config.seed,
            threads=config.threads,
        ),
        **overrides,
    )


def held_out_success(policy_dir: str | Path, config: SanityConfig) -> dict:
    """Success on the environment's eval tasks (never trained on), greedy and at T=1."""
    env = get_environment(ENVIRONMENT)
    model, tokenizer = load_policy(policy_dir)
    chat = ChatFormat.for_policy(tokenizer, policy_dir)
    figures = success_rates(model, tokenizer, EpisodeRunner(env), env.tasks("eval")[: config.eval_tasks], chat=chat)
    return {mode: round(figures[mode]["success"], 4) for mode in ("greedy", "t1")}


def rl_run(start: str | Path, out_dir: str | Path, rl: RLConfig, config: SanityConfig, scorer=None) -> dict:
    """RL from `start` against the rubric (or `scorer`); the figures of its last checkpoint and
    of its batches (the first and the last iteration's success, the last KL)."""
    env = get_environment(ENVIRONMENT)
    series: dict[int, dict] = {}
    started = time.monotonic()
    result = train_rl(
        policy_dir=start,
        scorer=scorer or rubric_scorer(),
        train_tasks=env.tasks("train"),
        dev_tasks=env.tasks("dev"),
        runner=EpisodeRunner(env),
        config=rl,
        out_dir=out_dir,
        callbacks=RLCallbacks(metrics=lambda step, figures: series.setdefault(step, {}).update(figures)),
    )
    last = series[max(series)] if series else {}
    return {
        "stop_reason": result.stop_reason,
        "iterations": result.iterations,
        "batch_success_first": series[min(series)]["episode/success"] if series else None,
        "batch_success_last": last.get("episode/success"),
        "kl_last": last.get("objective/kl"),
        "explained_variance_last": last.get("value/explained_variance"),
        "held_out": held_out_success(result.last_checkpoint, config),
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="RL against the rubric in an environment with a known optimum.")
    parser.add_argument("--algorithm", default="ppo", choices=["ppo", "rloo", "grpo"])
    parser.add_argument("--out", default="var/rl-sanity")
    add_config_arguments(parser, SanityConfig)
    args = parser.parse_args(argv)
    try:
        config = config_from_arguments(SanityConfig, args)
    except ValueError as exc:
        parser.error(" ".join(str(exc).splitlines()))
    start = bc_start(Path(args.out) / f"start-s{config.seed}", config)
    figures = {"start": held_out_success(start, config)}
    figures[args.algorithm] = rl_run(start, Path(args.out) / args.algorithm, rl_config(args.algorithm, config), config)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
