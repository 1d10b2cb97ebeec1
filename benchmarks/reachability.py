"""Reachability: pass@k at T=1 of one policy in each habit situation, before any training (plain
Python, no Django). A situation whose pass@16 is near 0 is one the policy never escapes by
sampling, so no outcome-paid method (RL, expert iteration, preferences over its samples) can
learn it there: redesign the habit, or say why (issue 54).

    .venv/bin/python benchmarks/reachability.py POLICY_DIR [--pass-at 1 4 16] [--tasks 300] \\
        [--worlds 10001 10002] [--json FILE]

By default the policy plays the fresh world's dev tasks (training.envs.base FRESH_WORLD_SEED,
the world RL judges its checkpoints on and no training uses for data; training/rl/dev.py);
`--worlds` plays unseen worlds of those seeds instead (10,000 and above: no name shared with a
training world). `--tasks N` takes N tasks across the kinds of question (every kind in
proportion; 0: all). n = max(k) samples per task at T=1, and the unbiased estimator
(training/evaluation/pass_at_k.py), per situation (the task's metadata "situation",
training/envs/encyclopedia/habits.py) and overall, each with a 95% bootstrap interval over
tasks. Prints a table per world; `--json FILE` writes {"<world seed>": {"tasks", "samples",
"pass@k", "n", "situations": {...}}}. benchmarks/loop_heldout.py `--pass-at` measures the same
beside other policies on held-out worlds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.loop_heldout import Policy, fresh_dev_tasks, pass_at_k_cells, print_pass_at_k, unseen_world_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="the policy's directory")
    parser.add_argument("--pass-at", nargs="+", type=int, default=[1, 4, 16], help="the k of pass@k")
    parser.add_argument("--tasks", type=int, default=300, help="tasks per world, taken across kinds (0: all)")
    parser.add_argument(
        "--worlds", nargs="*", type=int, default=[], help="unseen worlds' seeds (none: the fresh world)"
    )
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    if any(k < 1 for k in args.pass_at) or args.tasks < 0:
        parser.error("--pass-at takes k >= 1 and --tasks 0 or more")
    torch.set_num_threads(1)
    policy = Policy.load("policy", args.policy)
    report = {}
    for seed in args.worlds or [None]:
        if seed is None:
            runner, tasks, seed = fresh_dev_tasks(args.tasks)
            where = f"the fresh world (seed {seed}), dev tasks"
        else:
            runner, tasks = unseen_world_tasks(seed, "all", args.tasks)
            where = f"the unseen world of seed {seed}"
        cells = report[str(seed)] = {
            "tasks": len(tasks),
            **pass_at_k_cells(policy, runner, tasks, args.pass_at, seed=seed),
        }
        print(f"\n{args.policy} on {where}, {len(tasks)} tasks:", end="")
        print_pass_at_k({"policy": cells})
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
