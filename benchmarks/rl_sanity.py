"""Does RL learn what it is paid for? PPO, RLOO and GRPO against the rubric in the environment
with a known optimum (training/envs/codeword.py, 100% at T=1 in two steps), from a
behaviour-cloned start, over seeds; held-out tasks, the last checkpoint, greedy beside T=1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rl_sanity.py [--seeds 0 1] [--algorithms ppo rloo grpo]
        [--variant 'NAME: field=value ...'] [--mutate sign kl] [--set iterations=30 ...]

`--variant` runs RL with RLConfig overrides beside the defaults (`before: lam=0.95
loss_aggregation=token` is the product's RL before issue 43). `--mutate` breaks one thing on
purpose to show the check catches it: `sign` flips the advantage in the policy loss, `kl`
rewards the KL instead of charging it. `--set` overrides SanityConfig (iterations, bc_steps, ...).
Plain Python, no Django; the starts are cached under --out.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks._common import config_from_settings, parse_setting

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def mutated(kind: str):
    """One deliberate bug in the RL math, undone on exit."""
    import training.rl.ppo_math as ppo_math

    name = {"sign": "policy_loss", "kl": "kl_penalty_rewards"}[kind]
    right = getattr(ppo_math, name)
    if kind == "sign":

        def wrong(logprobs, old, advantages, *args, **kwargs):
            return right(logprobs, old, -advantages, *args, **kwargs)
    else:

        def wrong(scores, logprobs, ref, mask, kl_coef):
            return right(scores, logprobs, ref, mask, -kl_coef)

    setattr(ppo_math, name, wrong)
    try:
        yield
    finally:
        setattr(ppo_math, name, right)


def main() -> None:
    import torch

    from training.rl.sanity import SanityConfig, bc_start, held_out_success, rl_config, rl_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--algorithms", nargs="+", default=["ppo", "rloo", "grpo"])
    parser.add_argument("--variant", action="append", default=[], help="'NAME: field=value ...' (RLConfig)")
    parser.add_argument("--mutate", nargs="*", default=[], choices=["sign", "kl"])
    parser.add_argument("--set", nargs="*", default=[], help="SanityConfig overrides, field=value")
    parser.add_argument("--out", default="var/rl-sanity")
    args = parser.parse_args()
    base, _ = config_from_settings(parser, args.set, SanityConfig)
    torch.set_num_threads(base.threads)
    variants = [("defaults", {}, None)]
    for text in args.variant:
        name, _, settings = text.partition(":")
        variants.append(
            (name.strip(), {k: parse_setting(v) for k, v in (s.split("=", 1) for s in settings.split())}, None)
        )
    variants += [(f"mutated: {kind}", {}, kind) for kind in args.mutate]

    print(f"Sanity budget: {asdict(base)}")
    print(
        "| seed | algorithm | RL | start T=1 / greedy | last checkpoint T=1 / greedy | batches first -> last | KL (last batch) | stop | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        config = replace(base, seed=seed)
        start = bc_start(Path(args.out) / f"start-s{seed}-{config.bc_steps}", config)
        before = held_out_success(start, config)
        for algorithm in args.algorithms:
            for name, settings, mutation in variants:
                rl = rl_config(algorithm, config, **settings)
                out = Path(args.out) / f"s{seed}-{algorithm}-{name.replace(' ', '').replace(':', '-')}"
                if mutation:
                    with mutated(mutation):
                        after = rl_run(start, out, rl, config)
                else:
                    after = rl_run(start, out, rl, config)
                print(
                    f"| {seed} | {algorithm} | {name} | {before['t1']:.1%} / {before['greedy']:.1%} "
                    f"| {after['held_out']['t1']:.1%} / {after['held_out']['greedy']:.1%} "
                    f"| {after['batch_success_first']:.1%} -> {after['batch_success_last']:.1%} "
                    f"| {after['kl_last']:.2f} | {after['stop_reason']} | {after['seconds']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
