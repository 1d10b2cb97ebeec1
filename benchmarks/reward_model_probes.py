"""Reward models of one dataset under several settings, by their probes: held-out accuracy,
the labels' own agreement with the rubric (the ceiling that accuracy is read against), the
answer-swap probe (the same trajectory with only the final answer changed: does the model
check the answer?), and accuracy on fresh pairs of the policy it will be used on.

    ARBITER_VAR_DIR=/tmp/exp-var .venv/bin/python benchmarks/reward_model_probes.py \
        --snapshot 1 --policy 1 --variant "scratch: {}" \
        --variant 'from-policy: {"backbone": "/tmp/bcx/s1-lr3", "learning_rate": 1e-4}' --seeds 0 1

Each variant is `NAME: JSON` of reward-model run settings; each runs as an ordinary
`reward_model` run (launched and executed in this process, as a worker would) in the
database that ARBITER_VAR_DIR / DATABASE_URL name. Prints one JSON line per run and a table.

`--curve 250 500 1000 2000` instead trains each variant on seeded subsamples of that many
of the snapshot's training pairs (ties left out) and reports held-out accuracy and the
answer-swap probe at each size: the learning curve.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")


def main() -> None:
    import django

    django.setup()
    from annotate.models import Policy
    from rewardmodel.models import RewardModel
    from training.loop.rounds import pipeline_user, run_in_process

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", type=int, required=True)
    parser.add_argument("--policy", type=int, required=True, help="the policy whose tokenizer and samples are used")
    parser.add_argument("--variant", action="append", required=True, help="NAME: JSON settings")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--curve", nargs="*", type=int, default=[], help="training-pair counts of a learning curve")
    args = parser.parse_args()
    policy = Policy.objects.get(pk=args.policy)
    if args.curve:
        return learning_curve(args, policy)
    rows = []
    for variant in args.variant:
        name, _, settings = variant.partition(":")
        for seed in args.seeds:
            run = run_in_process(
                kind="reward_model",
                name=f"probe {name.strip()} seed {seed}",
                user=pipeline_user(),
                progress=lambda fraction, message: None,
                config={
                    "snapshot_id": args.snapshot,
                    "name": f"probe-{name.strip()}-{seed}",
                    "eval_policy_id": policy.pk,
                    "tokenizer_dir": policy.model_dir,
                    "seed": seed,
                    **json.loads(settings or "{}"),
                },
            )
            metrics = RewardModel.objects.get(pk=run.summary["reward_model_id"]).metrics
            row = {
                "variant": name.strip(),
                "seed": seed,
                "accuracy": metrics["test"]["accuracy"],
                "accuracy_ci": metrics["test"].get("accuracy_ci"),
                "test_pairs": metrics["test"]["n"],
                "labels_vs_rubric": (metrics.get("labels_vs_rubric") or {}).get("accuracy"),
                "answer_swap": (metrics.get("answer_swap") or {}).get("accuracy"),
                "answer_swap_pairs": (metrics.get("answer_swap") or {}).get("n"),
                "policy_pairs": (metrics.get("policy_pairs") or {}).get("accuracy"),
                "train_seconds": (metrics.get("train") or {}).get("seconds"),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)

    def pct(value) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    print("\nvariant | seeds | held-out accuracy | labels vs rubric | answer swap | fresh policy pairs | train s")
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]

        def median(key):
            values = [r[key] for r in mine if r[key] is not None]
            return statistics.median(values) if values else None

        print(
            f"{name} | {len(mine)} | {pct(median('accuracy'))} | {pct(median('labels_vs_rubric'))} | "
            f"{pct(median('answer_swap'))} | {pct(median('policy_pairs'))} | {median('train_seconds')}"
        )


def learning_curve(args, policy) -> None:
    import random
    import tempfile

    from annotate.exports import iter_rows
    from annotate.models import DatasetSnapshot, SnapshotPair
    from rewardmodel.evaluate import pair_metrics
    from rewardmodel.probes import answer_swap_accuracy, answer_swap_pairs
    from rewardmodel.scoring import RewardScorer
    from rewardmodel.services import probe_trajectories
    from rewardmodel.train import RewardModelConfig, train_reward_model

    snapshot = DatasetSnapshot.objects.get(pk=args.snapshot)
    train = [r for r in iter_rows(snapshot, "trl", split="train") if r["preferred"] != "tie"]
    test = [r for r in iter_rows(snapshot, "trl", split="test") if r["preferred"] != "tie"]
    train_tasks = set(SnapshotPair.objects.filter(snapshot=snapshot, split="train").values_list("task_id", flat=True))
    probes = answer_swap_pairs(probe_trajectories(snapshot, policy, train_tasks), seed=0)
    print(f"{len(train)} training pairs, {len(test)} test pairs, {len(probes)} answer-swap pairs", flush=True)
    rows = []
    for variant in args.variant:
        name, _, settings = variant.partition(":")
        for size in args.curve:
            for seed in args.seeds:
                subset = random.Random(seed).sample(train, min(size, len(train)))
                config = RewardModelConfig(
                    **{"tokenizer_dir": policy.model_dir, "seed": seed, **json.loads(settings or "{}")}
                )
                with tempfile.TemporaryDirectory() as out:
                    result = train_reward_model(subset, config, Path(out))
                    scorer = RewardScorer(result.model_dir)
                    chosen, rejected = scorer.score_pairs(test)
                    held_out = pair_metrics(chosen, rejected, margins=[r["margin"] for r in test])
                    swap = answer_swap_accuracy(scorer, probes)
                row = {
                    "variant": name.strip(),
                    "pairs": len(subset),
                    "seed": seed,
                    "accuracy": held_out["accuracy"],
                    "answer_swap": swap.get("accuracy"),
                    "seconds": round(result.seconds, 1),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\nvariant | pairs | held-out accuracy, median (per seed) | answer swap, median (per seed)")
    for name in dict.fromkeys(r["variant"] for r in rows):
        for size in dict.fromkeys(r["pairs"] for r in rows if r["variant"] == name):
            mine = [r for r in rows if r["variant"] == name and r["pairs"] == size]
            acc = [r["accuracy"] for r in mine]
            swap = [r["answer_swap"] for r in mine if r["answer_swap"] is not None]
            print(
                f"{name} | {size} | {statistics.median(acc):.3f} ({' '.join(f'{a:.3f}' for a in acc)}) | "
                + (f"{statistics.median(swap):.3f} ({' '.join(f'{a:.3f}' for a in swap)})" if swap else "-")
            )


if __name__ == "__main__":
    main()
