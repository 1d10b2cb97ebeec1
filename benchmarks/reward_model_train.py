"""Reward-model training: Arbiter's run against a plain TRL script, and the learning curve.

    .venv/bin/python benchmarks/reward_model_train.py --repeats 3
    .venv/bin/python benchmarks/reward_model_train.py --curve --sizes 250 500 1000 2000 --seeds 0 1 2

Data: the scratch database (`--database`, dropped and re-created unless `--reuse`) gets
scripted trajectories on every task of the encyclopedia (`--tasks` per split; three per
agent per task, six comparisons per task) judged by one simulated
annotator each (Bradley-Terry over the rubric utility at temperature 1, 10% of labels
flipped), frozen into a snapshot split by task (80/20). Its `trl` export is the data.

Overhead (default): in fresh child processes, alternating, `--repeats` times each:
(1) a plain TRL script: load the train JSONL, the same serialized pairs
(`rewardmodel.train.pair_dataset`), the same model and settings, `RewardTrainer.train()`,
`save_model`; (2) the same training as an Arbiter run (`run_launch` + `run_execute` in the
process, as a worker does: database reads, progress, metrics and checkpoints written,
held-out evaluation and registration). Reports median wall times and their ratio.

Learning curve (`--curve`): held-out accuracy on the whole test split against the number of
training pairs, a seeded subsample per seed (Django-free, in this process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import add_database_argument, bench_env, ensure_bench_database, parse_setting

ROOT = Path(__file__).resolve().parent.parent

SETTINGS = {"epochs": 3.0, "batch_size": 16, "hidden": 128, "layers": 2, "heads": 4, "max_length": 512}


def work_dir(env: dict) -> Path:
    """Data, tokenizer and models, in the scratch database's storage folder."""
    return Path(env["ARBITER_VAR_DIR"]) / "reward_model"


def _django(env: dict) -> None:
    os.environ.update(env)
    import django

    django.setup()


def prepare(env: dict, n_tasks: int) -> dict:
    """Build the snapshot and export its train/test rows; returns paths and counts."""
    _django(env)
    from annotate.exports import iter_rows
    from annotate.services.campaigns import campaign_get_or_create
    from annotate.services.comparisons import comparisons_build
    from annotate.services.datasets import SnapshotFilters, snapshot_create
    from rewardmodel.services import labels_vs_rubric, test_pairs_with_truth
    from training.envs.registry import get_environment
    from training.policy.bc import BCConfig, demonstration_texts, play_demonstrations
    from training.policy.layout import TOOL_PARSER
    from training.policy.model_io import train_tokenizer
    from training.simulated_annotators import AnnotatorProfile
    from training.simulation import campaign_simulate_labels, scripted_trajectories_generate

    started = time.monotonic()
    work = work_dir(env)
    work.mkdir(parents=True, exist_ok=True)
    campaign, _ = campaign_get_or_create(name="bench-rm")
    campaign.votes_per_comparison = 1
    campaign.save()
    for split in ("train", "dev", "eval"):
        scripted_trajectories_generate(campaign=None, n_tasks=n_tasks, split=split, samples_per_agent=3, seed=11)
    from annotate.models import Task

    comparisons_build(campaign=campaign, task_ids=list(Task.objects.values_list("pk", flat=True)), max_per_task=6)
    campaign_simulate_labels(
        campaign=campaign, annotators=1, profile=AnnotatorProfile(temperature=1.0, flip=0.1), seed=11
    )
    snapshot = snapshot_create(
        name="bench-rm",
        campaigns=[campaign],
        filters=SnapshotFilters(include_synthetic=True),
        test_fraction=0.2,
        seed=11,
    )
    paths = {}
    for split in ("train", "test"):
        rows = [r for r in iter_rows(snapshot, "trl", split=split) if r["preferred"] != "tie"]
        paths[split] = str(work / f"{split}.jsonl")
        Path(paths[split]).write_text("".join(json.dumps(r) + "\n" for r in rows))
    # The default policy's tokenizer recipe (training/policy/services.py) on the main world's
    # demonstrations alone, at the vocabulary this benchmark has always used.
    played = play_demonstrations(get_environment("encyclopedia"), BCConfig(extra_worlds=0), parser=TOOL_PARSER)
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=2048)
    tokenizer.save_pretrained(work / "tokenizer")
    ceiling = labels_vs_rubric(test_pairs_with_truth(snapshot))
    return {
        "snapshot_id": snapshot.pk,
        "paths": paths,
        "tokenizer": str(work / "tokenizer"),
        "train_pairs": sum(1 for _ in open(paths["train"])),
        "test_pairs": sum(1 for _ in open(paths["test"])),
        "labels_vs_rubric": ceiling,
        "seconds": round(time.monotonic() - started, 1),
    }


def plain_trl(train_path: str, tokenizer_dir: str, settings: dict) -> dict:
    """What a researcher would write with TRL alone, on the same pairs and settings."""
    started = time.monotonic()
    import transformers
    from trl import RewardConfig, RewardTrainer

    from rewardmodel.backbones import build_backbone, max_context
    from rewardmodel.train import RewardModelConfig, pair_dataset

    config = RewardModelConfig(tokenizer_dir=tokenizer_dir, **settings)
    work = work_dir(dict(os.environ))
    rows = [json.loads(line) for line in open(train_path)]
    transformers.set_seed(0)
    model, tokenizer = build_backbone(config)
    max_tokens = max_context(model, tokenizer, config.max_length)
    dataset = pair_dataset(rows, tokenizer, max_tokens, use_margin=True)
    args = RewardConfig(
        output_dir=str(work / "plain"),
        learning_rate=config.resolved_learning_rate(),
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        warmup_steps=config.warmup_ratio,
        seed=0,
        max_length=max_tokens,
        eos_token=tokenizer.eos_token,
        bf16=False,
        activation_checkpointing=False,
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
        save_strategy="no",
        logging_steps=10,
    )
    trainer = RewardTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    train_started = time.monotonic()
    trainer.train()
    train_seconds = time.monotonic() - train_started
    trainer.save_model(str(work / "plain" / "model"))
    return {"seconds": time.monotonic() - started, "train_seconds": train_seconds, "steps": trainer.state.global_step}


def arbiter_run(env: dict, snapshot_id: int, tokenizer_dir: str, settings: dict) -> dict:
    started = time.monotonic()
    _django(env)
    from django.contrib.auth import get_user_model

    from webapp.models import Run
    from webapp.runs.services import run_execute, run_launch

    user, _ = get_user_model().objects.get_or_create(username="bench-admin")
    run = run_launch(
        kind="reward_model",
        user=user,
        enqueue=False,
        config={
            "snapshot_id": snapshot_id,
            "tokenizer_dir": tokenizer_dir,
            "name": f"bench-{time.time_ns()}",
            **settings,
        },
    )
    run_execute(run_id=run.pk, attempt=run.attempt)
    run = Run.objects.get(pk=run.pk)
    if run.status != "succeeded":
        raise SystemExit(f"run {run.pk} {run.status}: {run.error}")
    from rewardmodel.models import RewardModel

    model = RewardModel.objects.get(run=run)
    return {
        "seconds": time.monotonic() - started,
        "train_seconds": model.metrics["train"]["seconds"],
        "steps": model.metrics["train"]["steps"],
        "accuracy": model.metrics["test"]["accuracy"],
    }


def _child(*args: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def curve(info: dict, sizes: list[int], seeds: list[int], settings: dict, work: Path) -> list[dict]:
    from rewardmodel.evaluate import pair_metrics
    from rewardmodel.scoring import RewardScorer
    from rewardmodel.train import RewardModelConfig, train_reward_model

    train = [json.loads(line) for line in open(info["paths"]["train"])]
    test = [json.loads(line) for line in open(info["paths"]["test"])]
    results = []
    for size in sizes:
        if size > len(train):
            print(f"{size} asked, {len(train)} training pairs exist: using all of them", flush=True)
            size = len(train)
        for seed in seeds:
            rows = random.Random(seed).sample(train, size)
            config = RewardModelConfig(tokenizer_dir=info["tokenizer"], seed=seed, checkpoint_every=0, **settings)
            out = work / f"curve-{size}-{seed}"
            result = train_reward_model(rows, config, out)
            chosen, rejected = RewardScorer(result.model_dir).score_pairs(test)
            m = pair_metrics(chosen, rejected, margins=[r["margin"] for r in test])
            row = {
                "pairs": size,
                "seed": seed,
                "accuracy": m["accuracy"],
                "ci": m["accuracy_ci"],
                "ece": m["ece"],
                "seconds": round(result.seconds, 1),
                "steps": result.steps,
            }
            print(json.dumps(row), flush=True)
            results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--curve", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--tasks",
        type=int,
        default=1000,
        help="encyclopedia tasks per split that get trajectories (default: 1000, i.e. all)",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help=f"reward-model settings over this benchmark's {SETTINGS}",
    )
    parser.add_argument(
        "--reuse", action="store_true", help="reuse the data of the previous invocation (the database is then kept)"
    )
    add_database_argument(parser)
    args = parser.parse_args()
    settings = {**SETTINGS, **{k: parse_setting(v) for k, v in (kv.split("=", 1) for kv in args.set)}}
    env = bench_env(args.database)
    work = work_dir(env)
    info_path = work / "info.json"
    if args.reuse and info_path.exists():
        info = json.loads(info_path.read_text())
    else:
        env = ensure_bench_database(args.database)
        info = _child("_prepare", str(args.tasks), env=env)
        info_path.write_text(json.dumps(info))
    print(
        f"data: {info['train_pairs']} train / {info['test_pairs']} test pairs; labels agree with the rubric "
        f"{info['labels_vs_rubric']['accuracy']:.3f} on {info['labels_vs_rubric']['n']} test pairs "
        f"(built in {info['seconds']} s)",
        flush=True,
    )
    if args.curve:
        rows = curve(info, args.sizes, args.seeds, settings, work)
        print("pairs  accuracy (median of seeds)  per seed")
        for size in sorted({r["pairs"] for r in rows}):
            accs = [r["accuracy"] for r in rows if r["pairs"] == size]
            print(f"{size:5d}  {statistics.median(accs):.3f}  {' '.join(f'{a:.3f}' for a in accs)}")
        return
    if not args.repeats:
        return
    plain, run = [], []
    for i in range(args.repeats):
        plain.append(_child("_plain", info["paths"]["train"], info["tokenizer"], json.dumps(settings), env=env))
        run.append(_child("_run", str(info["snapshot_id"]), info["tokenizer"], json.dumps(settings), env=env))
        print(
            f"repeat {i + 1}: plain TRL {plain[-1]['seconds']:.1f} s (train {plain[-1]['train_seconds']:.1f} s), "
            f"Arbiter run {run[-1]['seconds']:.1f} s (train {run[-1]['train_seconds']:.1f} s, "
            f"held-out accuracy {run[-1]['accuracy']:.3f})",
            flush=True,
        )
    p, r = statistics.median(x["seconds"] for x in plain), statistics.median(x["seconds"] for x in run)
    print(
        f"median wall time: plain TRL {p:.1f} s, Arbiter run {r:.1f} s, ratio {r / p:.2f} "
        f"(steps {plain[0]['steps']} vs {run[0]['steps']})"
    )


if __name__ == "__main__":
    # The children: the parent passes the scratch database's environment.
    if len(sys.argv) > 1 and sys.argv[1] == "_prepare":
        print(json.dumps(prepare(dict(os.environ), int(sys.argv[2]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "_plain":
        print(json.dumps(plain_trl(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "_run":
        print(json.dumps(arbiter_run(dict(os.environ), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))))
    else:
        main()
