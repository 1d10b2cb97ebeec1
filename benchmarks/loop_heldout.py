"""The loop's policies and reward model on held-out worlds no training step saw (plain Python,
no Django): what an outside evaluation of `run_pipeline` measures.

    .venv/bin/python benchmarks/loop_heldout.py --policy start=DIR --policy best=DIR --policy last=DIR \
        [--reward-model RM_DIR] [--worlds 10001 10002] [--split all] [--best-of 4]

Per world (an encyclopedia generated from that seed with `unseen=True`: no name shared with
any training world) and per policy: rubric success greedy (one episode per task) and at T=1
(one per task, the same seeds for every policy), each with its 95% interval, and the paired
difference from the first policy with a 95% bootstrap interval over tasks; the share of
episodes that answer without opening a page (the 2-step guess). With a reward model:
best-of-n of the first policy at T=1 (n samples per task, the highest score kept); the
answer-swap probe (each of the first policy's episodes with only its answer changed, right
against wrong); natural pairs (two of its samples of one task, one correct and one not) by
the rubric; and the mean score by (steps, correct). Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def interval(values: list[float]) -> tuple[float, float, float]:
    mean = statistics.fmean(values) if values else 0.0
    half = 1.96 * (statistics.pstdev(values) / len(values) ** 0.5) if len(values) > 1 else 0.0
    return mean, mean - half, mean + half


def paired_bootstrap(a: list[float], b: list[float], seed: int = 0, rounds: int = 2000) -> tuple[float, float, float]:
    """Mean of b - a over tasks with a 95% bootstrap interval (resampling tasks)."""
    rng = random.Random(seed)
    diffs = [y - x for x, y in zip(a, b)]
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return statistics.fmean(diffs), means[int(0.025 * rounds)], means[int(0.975 * rounds)]


def guessed(episode) -> bool:
    """Answered without opening any page."""
    tools = [s.get("tool") for s in episode.steps if s.get("kind") == "action"]
    return episode.episode.record.answer is not None and "open" not in tools


def main() -> None:
    import torch

    from rewardmodel.evaluate import ordering_accuracy
    from rewardmodel.probes import Probed, answer_swap_accuracy, answer_swap_pairs
    from training.envs.base import EpisodeRunner
    from training.envs.encyclopedia.environment import EncyclopediaEnvironment
    from training.policy.chat import ChatFormat
    from training.policy.model_io import load_policy
    from training.policy.rollout import RolloutConfig, rollout
    from training.rl.scorers import episode_steps

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append", required=True, help="LABEL=DIR; the first is the baseline")
    parser.add_argument("--reward-model", default="")
    parser.add_argument("--worlds", nargs="+", type=int, default=[10_001, 10_002])
    parser.add_argument("--split", default="all", help="train, dev, eval or all (every task is unseen)")
    parser.add_argument("--best-of", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=0, help="at most this many tasks per world (0: all)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    policies = [tuple(item.split("=", 1)) for item in args.policy]
    scorer = None
    if args.reward_model:
        from rewardmodel.scoring import RewardScorer

        scorer = RewardScorer(args.reward_model)

    report = {}
    for seed in args.worlds:
        env = EncyclopediaEnvironment(seed=seed, unseen=True)
        tasks = [
            t
            for split in (("train", "dev", "eval") if args.split == "all" else (args.split,))
            for t in env.tasks(split)
        ]
        tasks = tasks[: args.tasks] if args.tasks else tasks
        runner = EpisodeRunner(env)
        world = report[seed] = {"tasks": len(tasks), "policies": {}}
        baseline = {}
        for label, directory in policies:
            model, tokenizer = load_policy(directory)
            chat = ChatFormat.for_policy(tokenizer, directory)
            row = {}
            for mode, temperature in (("greedy", 0.0), ("t1", 1.0)):
                episodes = rollout(
                    model,
                    tokenizer,
                    runner,
                    tasks,
                    RolloutConfig(temperature=temperature, batch_size=64),
                    seeds=[seed * 1000 + i for i in range(len(tasks))],
                    chat=chat,
                )
                success = [float(e.outcome.correct) for e in episodes]
                row[mode] = {
                    "success": interval(success),
                    "guess": statistics.fmean(map(guessed, episodes)),
                    "steps": statistics.fmean(e.outcome.parts["steps"] for e in episodes),
                }
                if label == policies[0][0]:
                    baseline[mode] = success
                else:
                    row[mode]["gain"] = paired_bootstrap(baseline[mode], success, seed=seed)
            world["policies"][label] = row
            if scorer is None or label != policies[0][0]:
                continue
            n = args.best_of
            samples = rollout(
                model,
                tokenizer,
                runner,
                [t for t in tasks for _ in range(n)],
                RolloutConfig(temperature=1.0, batch_size=64),
                seeds=[seed * 7919 + 11 + i for i in range(n * len(tasks))],
                chat=chat,
            )
            scores = scorer.score_episodes([(e.task.prompt, episode_steps(e)) for e in samples])
            best = [max(range(n), key=lambda j: scores[i * n + j]) for i in range(len(tasks))]
            single = [float(samples[i * n].outcome.correct) for i in range(len(tasks))]
            chosen = [float(samples[i * n + j].outcome.correct) for i, j in enumerate(best)]
            world["best_of_n"] = {
                "n": n,
                "success": interval(chosen),
                "one_sample": interval(single),
                "gain": paired_bootstrap(single, chosen, seed=seed),
            }
            probed = [
                Probed(
                    task=e.task.external_id,
                    prompt=e.task.prompt,
                    steps=episode_steps(e),
                    correct=bool(e.outcome.correct),
                )
                for e in samples
            ]
            swaps = answer_swap_pairs(probed, limit=10**6, seed=seed)
            swap = answer_swap_accuracy(scorer, swaps)
            kinds = defaultdict(list)  # the swap by whether the path shows the right answer
            for pair in swaps:
                prompt, right, wrong = pair
                seen = " ".join(str(st.get("content", "")) for st in right if st.get("kind") == "observation")
                answer = next(st["text"] for st in reversed(right) if st.get("kind") == "answer")
                kinds[
                    "right answer on a page read"
                    if answer.lower().removeprefix("the ") in seen.lower()
                    else "right answer on no page read"
                ].append(pair)
            swap["by_evidence"] = {kind: answer_swap_accuracy(scorer, pairs) for kind, pairs in kinds.items()}
            natural = []
            for i in range(len(tasks)):
                group = list(range(i * n, (i + 1) * n))
                for a in group:
                    for b in group:
                        if samples[a].outcome.correct and not samples[b].outcome.correct:
                            natural.append((scores[a], scores[b], 1.0, 0.0))
            by_shape = defaultdict(list)
            for e, s in zip(samples, scores):
                by_shape[(e.outcome.parts["steps"], bool(e.outcome.correct))].append(s)
            world["reward_model"] = {
                "answer_swap": swap,
                "natural_pairs": ordering_accuracy(natural),
                "mean_score_by_steps_correct": {
                    f"{k[0]} steps, {'correct' if k[1] else 'wrong'}": [round(statistics.fmean(v), 3), len(v)]
                    for k, v in sorted(by_shape.items())
                    if len(v) >= 5
                },
            }
        print(json.dumps({"world": seed, **world}, default=str), flush=True)

    print()
    for seed, world in report.items():
        print(f"world {seed} ({world['tasks']} tasks)")
        for label, row in world["policies"].items():
            cells = []
            for mode in ("t1", "greedy"):
                mean, low, high = row[mode]["success"]
                gain = row[mode].get("gain")
                cells.append(
                    f"{mode} {100 * mean:5.1f}% [{100 * low:4.1f}, {100 * high:4.1f}]"
                    + (f" gain {100 * gain[0]:+5.1f} [{100 * gain[1]:+5.1f}, {100 * gain[2]:+5.1f}]" if gain else "")
                    + f" guess {100 * row[mode]['guess']:3.0f}%"
                )
            print(f"  {label:<8} " + " | ".join(cells))
        if "best_of_n" in world:
            b = world["best_of_n"]
            print(
                f"  best-of-{b['n']} {100 * b['success'][0]:.1f}% (one sample {100 * b['one_sample'][0]:.1f}%, "
                f"gain {100 * b['gain'][0]:+.1f} [{100 * b['gain'][1]:+.1f}, {100 * b['gain'][2]:+.1f}])"
            )
            rm = world["reward_model"]
            print(
                f"  reward model: answer swap {rm['answer_swap']['accuracy']:.1%} (n {rm['answer_swap']['n']}: "
                + ", ".join(
                    f"{kind} {v['accuracy']:.1%} of {v['n']}" for kind, v in rm["answer_swap"]["by_evidence"].items()
                )
                + f"), natural pairs {rm['natural_pairs']['accuracy']:.1%} (n {rm['natural_pairs']['n']})"
            )
            print(f"  mean score by shape: {rm['mean_score_by_steps_correct']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
