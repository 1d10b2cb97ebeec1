"""Rubric success of policies on the main encyclopedia's eval split and on a world none of
their training saw (`encyclopedia-unseen`), greedy and at T=1, one episode per task.

    .venv/bin/python benchmarks/unseen_world.py POLICY_DIR [POLICY_DIR ...] [--environments encyclopedia encyclopedia-unseen]

The gap between the two columns is what the policy memorised rather than read.
"""

from __future__ import annotations

import argparse


def main() -> None:
    import torch

    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment
    from training.policy.chat import ChatFormat
    from training.policy.model_io import load_policy
    from training.policy.success_rates import success_rates

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+")
    parser.add_argument("--environments", nargs="+", default=["encyclopedia", "encyclopedia-unseen"])
    parser.add_argument("--split", default="eval")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.environments:
        env = get_environment(name)
        tasks = env.tasks(args.split)
        for directory in args.policies:
            model, tokenizer = load_policy(directory)
            figures = success_rates(
                model, tokenizer, EpisodeRunner(env), tasks, chat=ChatFormat.for_policy(tokenizer, directory)
            )
            g, t = figures["greedy"], figures["t1"]
            print(
                f"{name} {args.split} ({len(tasks)} tasks), {directory}: greedy {100 * g['success']:.1f}% "
                f"± {196 * g['stderr']:.1f}, T=1 {100 * t['success']:.1f}% ± {196 * t['stderr']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
