"""Behaviour cloning of the default policy without Django: the same steps as
`training.policy.services.policy_train_default` (tokenizer, demonstrations, model, BC, then
rubric success greedy and at temperature 1), timed, on the split you choose.

    nice -n 10 .venv/bin/python benchmarks/bc_policy.py [--split dev|eval] [--save DIR] [--set hidden=160 ...]

`--set` overrides BCConfig fields (numbers or strings). Iterate on dev; report eval. The
wall time of behaviour cloning is bounded by `BCConfig.max_seconds`, so on a busy machine a
run gets fewer optimizer steps: the step count is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import config_from_settings  # noqa: E402


def success_rates(model, tokenizer, runner, tasks, chat) -> dict:
    """The service's figures plus the first episodes' turns, to read what the policy does."""
    from training.policy.rollout import RolloutConfig, rollout
    from training.policy.success_rates import success_rates as rates

    figures = rates(model, tokenizer, runner, tasks, chat=chat)
    greedy = rollout(model, tokenizer, runner, tasks[:3], RolloutConfig(temperature=0.0), chat=chat)
    figures["greedy_examples"] = [[m["content"] for m in e.messages if m["role"] == "assistant"] for e in greedy]
    return figures


def main() -> None:
    import torch

    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment
    from training.policy.bc import (
        BCConfig,
        demonstration_texts,
        demonstrations,
        dev_judge,
        play_demonstrations,
        train_bc,
    )
    from training.policy.chat import ChatFormat
    from training.policy.layout import TOOL_PARSER
    from training.policy.model_io import build_model, save_policy, train_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=["dev", "eval"])
    parser.add_argument("--save", default="")
    parser.add_argument("--set", nargs="*", default=[], help="BCConfig overrides, field=value")
    args = parser.parse_args()
    config, overrides = config_from_settings(parser, args.set, BCConfig)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    env = get_environment(config.environment)
    held_out = env.tasks(args.split)
    started = time.monotonic()
    played = play_demonstrations(
        env, config, parser=TOOL_PARSER, make_env=lambda seed: get_environment(config.environment, seed=seed)
    )
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    chat = ChatFormat.for_policy(tokenizer, parser=TOOL_PARSER)
    examples = demonstrations(chat, played)
    prepared = time.monotonic() - started
    model = build_model(tokenizer, hidden=config.hidden, layers=config.layers, heads=config.heads, seed=config.seed)
    params = sum(p.numel() for p in model.parameters())
    tokens = sum(len(ids) for ids, _ in examples)
    print(
        f"{len(examples)} demonstrations, {tokens / len(examples):.0f} tokens each (mean), {params / 1e6:.2f}M "
        f"parameters; tokenizer + demonstrations {prepared:.1f} s",
        flush=True,
    )

    def metrics(step, figures):
        if step % 50 == 0 or step == 1:
            print(
                f"  step {step}: loss {figures['loss/total']:.3f} agent {figures['loss/agent']:.3f} "
                f"lr {figures['optim/lr']:.2e} t {time.monotonic() - started:.0f}s",
                flush=True,
            )

    def make_env(seed):
        return get_environment(config.environment, seed=seed)

    judge, judged_on = dev_judge(env, config, tokenizer, chat, make_env=make_env) if config.dev_every else (None, "")
    result = train_bc(model, tokenizer, examples, config, metrics=metrics, judge=judge)
    if "kept_step" in result:
        print(f"kept step {result['kept_step']} of {result['steps']}, judged on {judged_on}: {result['dev_curve']}")
    trained = time.monotonic() - started
    figures = success_rates(model, tokenizer, EpisodeRunner(env), held_out, chat)
    total = time.monotonic() - started
    if args.save:
        save_policy(model, tokenizer, args.save, tool_parser=TOOL_PARSER)
    print(
        json.dumps(
            {"overrides": overrides, "bc": {k: v for k, v in result.items() if k != "config"}, "figures": figures},
            indent=1,
            default=str,
        )
    )
    g, t = figures["greedy"], figures["t1"]
    print(
        f"\nRESULT {args.split} ({g['tasks']} tasks): greedy {100 * g['success']:.1f}% ± "
        f"{196 * g['stderr']:.1f}, T=1 {100 * t['success']:.1f}% ± {196 * t['stderr']:.1f}; "
        f"{result['steps']} steps; BC {result['seconds']:.0f} s, to end of BC {trained:.0f} s, "
        f"total {total:.0f} s; overrides {overrides}; config {asdict(config)}"
    )


if __name__ == "__main__":
    main()
