"""The encyclopedia's named demonstrators (training/envs/mistakes.py: habits, random, clean),
each played on every task of some worlds: success overall and per habit situation, with 95%
Wilson intervals. What behaviour cloning imitates, before any method runs (plain Python).

    .venv/bin/python benchmarks/demonstrators.py [--worlds 0 1 10001] [--json FILE]

A seed of 10,000 or more is an unseen world (no name shared with a training world).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    from core.intervals import share_interval
    from training.envs.base import EpisodeRunner
    from training.envs.encyclopedia.environment import UNSEEN_SEEDS_FROM, EncyclopediaEnvironment
    from training.envs.mistakes import DEMONSTRATORS, SLIPS, demonstrator_rates
    from training.policy.episodes import play_scripted
    from training.policy.parsers import PARSERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", nargs="+", type=int, default=[0, 1, 10_001])
    parser.add_argument("--size", default="", help="n_places,n_people,n_orgs (default: the default world's)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    size = dict(zip(("n_places", "n_people", "n_orgs"), map(int, args.size.split(",")))) if args.size else {}

    report: dict = {}
    for seed in args.worlds:
        env = EncyclopediaEnvironment(seed=seed, unseen=seed >= UNSEEN_SEEDS_FROM, **size)
        runner = EpisodeRunner(env)
        writer = PARSERS["compact"](list(runner.tools.values()))
        tasks = [t for split in ("train", "dev", "eval") for t in env.tasks(split)]
        for name in DEMONSTRATORS:
            mistakes, habits = demonstrator_rates(name, SLIPS)
            turns = env.demonstrator(seed=seed, mistakes=mistakes, habits=habits)
            right = defaultdict(list)
            for task in tasks:
                correct = play_scripted(runner, task, turns, writer).outcome.correct
                right["all"].append(correct)
                right[task.metadata["situation"]].append(correct)
            report.setdefault(name, {})[seed] = {
                situation: dict(zip(("right", "n", "low", "high"), (sum(v), len(v), *share_interval(sum(v), len(v)))))
                for situation, v in right.items()
            }
    for name, worlds in report.items():
        print(name)
        for seed, rows in worlds.items():
            cells = ", ".join(
                f"{situation} {row['right']}/{row['n']} {_pct(row)}" for situation, row in sorted(rows.items())
            )
            print(f"  world {seed}: {cells}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def _pct(row: dict) -> str:
    share = row["right"] / row["n"] if row["n"] else 0.0
    return f"{100 * share:.1f}% [{100 * row['low']:.1f}, {100 * row['high']:.1f}]"


if __name__ == "__main__":
    main()
