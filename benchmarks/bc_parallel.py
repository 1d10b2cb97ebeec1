"""Behaviour cloning in one process and in two (gloo), interleaved: seconds a step and how far
the two-process weights end from the one-process weights after the same steps.

    nice -n 10 .venv/bin/python benchmarks/bc_parallel.py [--steps 40] [--repeats 2] [--set hidden=160 ...]

Both arms train the same freshly built model (the default size unless `--set` says otherwise)
on the same demonstrations with the same batches; the two-process arm runs `train_bc` with
`processes=2` (core/parallel.py launches the ranks, core/ranks.py shares each batch and sums
the gradients). The two-process figure includes its launch (a few seconds), so it is also
given per step after the first (the first step's metrics reach the parent within the
launcher's half-second poll). Plain Python and torch, no Django. On a 2-core CPU this shows the cost of the
mechanism, not a gain (that is for several GPUs).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from benchmarks._common import config_from_settings

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import torch

    from training.envs.registry import get_environment
    from training.policy.bc import BCConfig, demonstration_texts, demonstrations, play_demonstrations, train_bc
    from training.policy.chat import ChatFormat
    from training.policy.layout import TOOL_PARSER
    from training.policy.model_io import build_model, train_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--set", nargs="*", default=[], help="BCConfig overrides, field=value")
    args = parser.parse_args()
    config, _ = config_from_settings(parser, args.set, BCConfig)
    config = replace(config, max_steps=args.steps, extend_steps=0, dev_every=0, max_seconds=0, budget_seconds=0)
    torch.set_num_threads(2)  # the one-process arm may use both cores, as each rank uses one

    env = get_environment(config.environment)
    played = play_demonstrations(
        env, config, parser=TOOL_PARSER, make_env=lambda seed: get_environment(config.environment, seed=seed)
    )
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    examples = demonstrations(ChatFormat.for_policy(tokenizer, parser=TOOL_PARSER), played)

    def train(processes: int):
        model = build_model(tokenizer, hidden=config.hidden, layers=config.layers, heads=config.heads, seed=config.seed)
        first_step: list[float] = []
        started = time.monotonic()
        result = train_bc(
            model,
            tokenizer,
            examples,
            replace(config, processes=processes, threads=2 if processes == 1 else 1),
            metrics=lambda step, values: first_step.append(time.monotonic()) if step == 1 else None,
        )
        wall = time.monotonic() - started
        after_first = (wall - (first_step[0] - started)) / max(1, result["steps"] - 1) if first_step else float("nan")
        return model, result, wall, after_first

    rows = []
    for repeat in range(args.repeats):
        for processes in (1, 2) if repeat % 2 == 0 else (2, 1):
            model, result, wall, after_first = train(processes)
            rows.append((processes, model, result, wall, after_first))
            print(
                f"  repeat {repeat + 1}, {processes} process(es): {result['steps']} steps in {wall:.1f} s, "
                f"{after_first:.3f} s a step after the first, end loss {result['loss/total']:.5f}",
                flush=True,
            )
    ones = [r for r in rows if r[0] == 1]
    twos = [r for r in rows if r[0] == 2]
    gap = max(
        float((a - b).detach().abs().max())
        for a, b in zip(ones[0][1].parameters(), twos[0][1].parameters(), strict=True)
    )
    loss_gap = abs(ones[0][2]["loss/total"] - twos[0][2]["loss/total"])
    print(
        f"\n{len(examples)} demonstrations, {sum(p.numel() for p in ones[0][1].parameters()) / 1e6:.2f}M parameters, "
        f"batch {config.batch_size}, {args.steps} steps, {args.repeats} repeats interleaved\n"
    )
    print("| processes | wall s (median) | s a step after the first (median) | end loss |")
    print("|---|---|---|---|")
    for label, arm in (("1 (2 threads)", ones), ("2 (1 thread each, gloo)", twos)):
        print(
            f"| {label} | {statistics.median(r[3] for r in arm):.1f} | {statistics.median(r[4] for r in arm):.3f} "
            f"| {arm[0][2]['loss/total']:.5f} |"
        )
    print(f"\nRESULT largest weight difference {gap:.2e}, end-loss difference {loss_gap:.2e}")


if __name__ == "__main__":
    main()
