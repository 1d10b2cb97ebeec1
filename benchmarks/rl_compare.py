"""RL of one policy in an environment, without Django, under several settings side by side:
PPO's critic (explained variance per iteration), and PPO against RLOO and GRPO, by the dev
rubric at each evaluation and the training batches' success. The dev tasks are the ones the
app's RL runs are judged on (training/rl/dev.py: the environment's fresh world where it has one,
`dev_tasks` of them).

    nice .venv/bin/python benchmarks/rl_compare.py POLICY_DIR --reward rubric|utility|RM_DIR \
        --variant "ppo-lam095: lam=0.95" --variant "ppo-lam1: lam=1.0 value_warmup=2" \
        --variant "grpo: algorithm=grpo learning_rate=3e-4" [--set iterations=20 ...] [--seeds 0 1]

Each variant is `NAME: field=value ...` (RLConfig fields) on top of `--set`. Prints one
JSON line per run and a table: median explained variance over all iterations and over the
second half, dev success (T=1, with its 95% bootstrap interval, and greedy) at the last
evaluation and at the best, the training batches' success at the first and last iteration,
and the wall time. Threads are set to 1 (a <1M-parameter model on CPU: measured faster)
unless a variant sets `threads`. A variant with `processes=N` runs data-parallel in N
processes (training/rl/rl_rank.py); the seeds' runs of the variants alternate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import fields
from pathlib import Path

from benchmarks._common import parse_setting

ROOT = Path(__file__).resolve().parent.parent


def _overrides(pairs: list[str]) -> dict:
    return {key: parse_setting(value) for key, value in (pair.split("=", 1) for pair in pairs)}


def run_one(policy: str, reward: str, environment: str, config, train_split: str) -> dict:
    from core.callbacks import RLCallbacks
    from training.rl.trainer import cli_inputs, train_rl, train_rl_in_processes

    arguments = {
        "environment": environment,
        "reward": reward,
        "dev_tasks": config.dev_tasks,
        "train_split": train_split,
    }
    metrics: list[dict] = []
    callbacks = RLCallbacks(metrics=lambda i, m: metrics.append({"iteration": i, **m}))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        if config.processes > 1:  # each process builds the same inputs itself
            result = train_rl_in_processes(
                inputs="training.rl.trainer:cli_inputs",
                arguments=arguments,
                policy_dir=policy,
                config=config,
                out_dir=out,
                callbacks=callbacks,
            )
        else:
            result = train_rl(
                policy_dir=policy, config=config, out_dir=out, callbacks=callbacks, **cli_inputs(**arguments)
            )
    seconds = time.monotonic() - started
    metrics = [m for m in metrics if "objective/kl" in m]  # the iterations' own (evaluations report apart)
    variance = [m["value/explained_variance"] for m in metrics if m.get("value/explained_variance") is not None]
    half = variance[len(variance) // 2 :]
    return {
        "message": result.message,
        "seconds": round(seconds, 1),
        "iterations": len(metrics),
        "explained_variance_median": statistics.median(variance) if variance else None,
        "explained_variance_median_second_half": statistics.median(half) if half else None,
        "train_success_first": metrics[0].get("episode/success") if metrics else None,
        "train_success_last": metrics[-1].get("episode/success") if metrics else None,
        "dev": [
            {
                "iteration": e["iteration"],
                **{
                    k: e["dev"].get(k) for k in ("success", "success_low", "success_high", "greedy_success", "episodes")
                },
            }
            for e in result.evaluations
        ],
        "best": result.best and {"iteration": result.best["iteration"], "dev": result.best["dev"]},
        "kl_last": metrics[-1].get("objective/kl") if metrics else None,
    }


def main() -> None:
    import torch

    from training.rl.config import RLConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy")
    parser.add_argument("--reward", default="rubric")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--train-split", default="train")
    parser.add_argument("--variant", action="append", required=True, help="NAME: field=value ...")
    parser.add_argument("--set", nargs="*", default=[], help="RLConfig fields for every variant")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    known = {f.name for f in fields(RLConfig)}
    common = _overrides(args.set)
    rows = []
    variants = []
    for variant in args.variant:
        name, _, rest = variant.partition(":")
        settings = {**common, **_overrides(rest.split())}
        unknown = set(settings) - known
        if unknown:
            parser.error(f"unknown RLConfig fields: {sorted(unknown)}")
        variants.append((name, settings))
    for seed in args.seeds:  # the variants interleaved: a drift in machine speed favours none
        for name, settings in variants:
            config = RLConfig(**{**settings, "seed": seed})
            torch.set_num_threads(1)  # a variant's `threads` holds for its own run only
            figures = run_one(args.policy, args.reward, args.environment, config, args.train_split)
            row = {"variant": name.strip(), "seed": seed, "settings": settings, **figures}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(
        "\nvariant, seed | EV median (2nd half) | dev T=1 last [95%] | greedy last | best it (dev) | "
        "train success first -> last | KL last | s"
    )
    for r in rows:
        last = r["dev"][-1] if r["dev"] else {}

        def pct(value):
            return "-" if value is None else f"{100 * value:.1f}%"

        ev = r["explained_variance_median"]
        ev2 = r["explained_variance_median_second_half"]
        best = r["best"] or {}
        print(
            f"{r['variant']}, {r['seed']} | {'-' if ev is None else f'{ev:.2f}'} "
            f"({'-' if ev2 is None else f'{ev2:.2f}'}) | {pct(last.get('success'))} "
            f"[{pct(last.get('success_low'))}, {pct(last.get('success_high'))}] | "
            f"{pct(last.get('greedy_success'))} | {best.get('iteration', '-')} "
            f"({pct((best.get('dev') or {}).get('success'))}) | {pct(r['train_success_first'])} -> "
            f"{pct(r['train_success_last'])} | {r['kl_last'] and round(r['kl_last'], 2)} | {r['seconds']}"
        )


if __name__ == "__main__":
    main()
