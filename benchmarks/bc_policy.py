"""Behaviour cloning without Django: the same steps as
`training.policy.services.policy_train_default` (tokenizer, demonstrations, model, BC, then
rubric success greedy and at temperature 1), timed, on the split you choose.

    nice -n 10 .venv/bin/python benchmarks/bc_policy.py [--split dev|eval|none] [--save DIR] [--set hidden=160 ...]
    .venv/bin/python benchmarks/bc_policy.py --base POLICY_DIR --set lora_rank=16 ... [--save DIR]

Without `--base` it builds the default architecture from nothing (its tokenizer trained on the
demonstrations); with it, it clones into that policy's own model, chat template and tool-call
parser (a registered pretrained model), all its weights or, with `lora_rank`, LoRA adapters
merged into the saved model (training/policy/lora.py). `--split none` skips the evaluation
(benchmarks/loop_heldout.py evaluates a saved policy on unseen worlds).

`--set` overrides BCConfig fields (numbers or strings). Iterate on dev; report eval. The
wall time of behaviour cloning is bounded by `BCConfig.max_seconds`, so on a busy machine a
run gets fewer optimizer steps: the step count is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks._common import config_from_settings

ROOT = Path(__file__).resolve().parent.parent


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
    from training.policy.lora import merged, parameter_counts, with_lora_if_asked
    from training.policy.model_io import build_model, load_policy, save_policy, train_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=["dev", "eval", "none"])
    parser.add_argument("--base", default="", help="a pretrained policy's directory to clone into")
    parser.add_argument("--save", default="")
    parser.add_argument("--set", nargs="*", default=[], help="BCConfig overrides, field=value")
    args = parser.parse_args()
    config, overrides = config_from_settings(parser, args.set, BCConfig)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    env = get_environment(config.environment)
    held_out = [] if args.split == "none" else env.tasks(args.split)
    started = time.monotonic()
    if args.base:
        model, tokenizer = load_policy(args.base)
        chat = ChatFormat.for_policy(tokenizer, args.base)
        tool_parser = chat.parser_name
    else:
        tool_parser = TOOL_PARSER
    played = play_demonstrations(
        env, config, parser=tool_parser, make_env=lambda seed: get_environment(config.environment, seed=seed)
    )
    if not args.base:
        tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
        chat = ChatFormat.for_policy(tokenizer, parser=TOOL_PARSER)
        model = build_model(tokenizer, hidden=config.hidden, layers=config.layers, heads=config.heads, seed=config.seed)
    model = with_lora_if_asked(model, config.lora_rank, config.lora_alpha)
    examples = demonstrations(chat, played)
    prepared = time.monotonic() - started
    counts = parameter_counts(model)
    tokens = sum(len(ids) for ids, _ in examples)
    print(
        f"{len(examples)} demonstrations, {tokens / len(examples):.0f} tokens each (mean), "
        f"{sum(sum(mask) for _, mask in examples) / len(examples):.0f} of them the agent's; "
        f"{counts['total'] / 1e6:.2f}M parameters, {counts['trainable'] / 1e6:.2f}M trained; "
        f"model + demonstrations {prepared:.1f} s",
        flush=True,
    )

    def metrics(step, figures):
        if step % 10 == 0 or step == 1:
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
    model = merged(model)
    trained = time.monotonic() - started
    if args.save:
        save_policy(model, tokenizer, args.save, tool_parser=tool_parser)
    if not held_out:
        print(f"\nRESULT no evaluation; {result['steps']} steps; BC {result['seconds']:.0f} s; overrides {overrides}")
        return
    figures = success_rates(model, tokenizer, EpisodeRunner(env), held_out, chat)
    total = time.monotonic() - started
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
