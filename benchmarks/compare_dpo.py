"""SFT and DPO against the reward model and RL, over the loops `run_pipeline --compare-dpo` ran
(one per seed), on the held-out tasks each loop was evaluated on:

    ARBITER_VAR_DIR=DIR .venv/bin/python manage.py run_pipeline --name cmp-s0 --compare-dpo
    ARBITER_VAR_DIR=DIR .venv/bin/python manage.py run_pipeline --name cmp-s1 --compare-dpo --seed 1 --policy-id P
    ARBITER_VAR_DIR=DIR .venv/bin/python benchmarks/compare_dpo.py --loops cmp-s0 cmp-s1 [--round 1] [--json F]
    .venv/bin/python benchmarks/compare_dpo.py --pool A.json B.json   (loops kept in other databases)

Per loop and mode (sampled at T=1, greedy): each system's success with its 95% interval over
tasks, and for each pair of methods (DPO, SFT, the RL run's best checkpoint by dev and its
last one, the start) the paired difference in success on the same tasks (b - a, points, 95%
bootstrap over tasks). Then the same pairs pooled over the loops: every (loop, task) a unit of
the bootstrap, so the interval holds the spread between seeds as well as between tasks.
Prints markdown tables and one JSON line. It reads the app's database (DATABASE_URL, else the
embedded one under ARBITER_VAR_DIR); it writes nothing there.

With `--tune KIND`, it chooses settings instead, on dev tasks only (never the held-out ones):
for each `--variant "NAME: field=value ..."` an `sft` or `dpo` run from the first loop's round
start on its dataset, then one evaluation run of them all on the dev tasks of `--dev-environment`
(the RL runs' dev world by default); prints each variant's dev success with its interval.
These runs and their evaluation are written to the database like any others.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ORDER = ("start", "RL best", "RL last", "SFT", "DPO")


def _systems(evaluation) -> dict[str, int]:
    """method -> evaluation entry id, for the loop's systems."""
    found = {}
    for entry in evaluation.entries.select_related("policy__run"):
        metadata = entry.policy.metadata or {}
        if entry.is_baseline:
            found["start"] = entry.pk
        elif "finetune" in metadata:
            found[metadata["finetune"]["kind"].upper()] = entry.pk
        elif "ppo" in metadata and entry.kind == "policy":
            found["RL best" if metadata["ppo"].get("best") else "RL last"] = entry.pk
    return found


def _per_task(evaluation, entry_id: int, mode: str) -> dict[int, float]:
    from training.models import EvaluationEpisode

    outcomes: dict[int, list[float]] = {}
    for task_id, correct in EvaluationEpisode.objects.filter(entry_id=entry_id, mode=mode).values_list(
        "task_id", "correct"
    ):
        outcomes.setdefault(task_id, []).append(float(correct))
    return {task: sum(values) / len(values) for task, values in outcomes.items()}


def _bootstrap(differences: list[float], seed: int = 0, rounds: int = 2000) -> dict:
    from core.intervals import bootstrap

    return bootstrap(differences, resamples=rounds, seed=seed)


def compare(loops: list[str], number: int) -> dict:
    from training.models import LoopRound

    report: dict = {"loops": {}, "pooled": {}}
    for loop in loops:
        loop_round = LoopRound.objects.filter(loop=loop, number=number).select_related("evaluation").first()
        if loop_round is None or loop_round.evaluation is None:
            raise SystemExit(f"Loop {loop!r} has no evaluated round {number}.")
        evaluation = loop_round.evaluation
        systems = _systems(evaluation)
        missing = {"SFT", "DPO"} - set(systems)
        if missing:
            raise SystemExit(
                f"Loop {loop!r} round {number} has no {' or '.join(sorted(missing))} policy: "
                "was it run with --compare-dpo?"
            )
        figures: dict = {"success": {}, "pairs": {}, "differences": {}}
        for mode in ("sampled", "greedy"):
            success = {m: _per_task(evaluation, systems[m], mode) for m in ORDER if m in systems}
            figures["success"][mode] = {m: _bootstrap(list(v.values())) for m, v in success.items() if v}
            methods = [m for m in ORDER if success.get(m)]
            for i, a in enumerate(methods):
                for b in methods[i + 1 :]:
                    tasks = sorted(set(success[a]) & set(success[b]))
                    differences = [success[b][t] - success[a][t] for t in tasks]
                    figures["pairs"][f"{mode}: {b} - {a}"] = _bootstrap(differences)
                    figures["differences"][f"{mode}: {b} - {a}"] = differences
        figures["evaluation_id"] = evaluation.pk
        figures["tasks"] = evaluation.config.get("tasks")
        figures["environment"] = evaluation.config.get("environment")
        report["loops"][loop] = figures
    return pooled_report(report)


def pooled_report(report: dict) -> dict:
    """The report with its loops' per-task differences pooled, pair by pair."""
    pooled: dict[str, list[float]] = {}
    for figures in report["loops"].values():
        for pair, differences in figures["differences"].items():
            pooled.setdefault(pair, []).extend(differences)
    report["pooled"] = {pair: _bootstrap(differences) for pair, differences in pooled.items()}
    return report


def _cell(figure: dict, points: bool = True) -> str:
    scale = 100
    if figure.get("mean") is None:
        return "-"
    sign = "+" if points else ""
    return f"{scale * figure['mean']:{sign}.1f} [{scale * figure['low']:{sign}.1f}, {scale * figure['high']:{sign}.1f}]"


def print_report(report: dict) -> None:
    for loop, figures in report["loops"].items():
        print(
            f"\n### {loop} (evaluation #{figures['evaluation_id']}, {figures['tasks']} tasks of {figures['environment']})\n"
        )
        print("| mode | " + " | ".join(ORDER) + " |")
        print("|---|" + "---|" * len(ORDER))
        for mode, rows in figures["success"].items():
            print(f"| {mode} | " + " | ".join(_cell(rows[m], points=False) if m in rows else "-" for m in ORDER) + " |")
    print("\n### Pooled over the loops (b - a, points; 95% bootstrap over (loop, task))\n")
    print("| pair | " + " | ".join(report["loops"]) + " | pooled |")
    print("|---|" + "---|" * (len(report["loops"]) + 1))
    for pair, figure in report["pooled"].items():
        cells = [_cell(f["pairs"][pair]) if pair in f["pairs"] else "-" for f in report["loops"].values()]
        print(f"| {pair} | " + " | ".join(cells) + f" | {_cell(figure)} |")


def tune(
    loop: str, number: int, kind: str, variants: list[str], dev_environment: str, dev_tasks: int, dev_split: str
) -> dict:
    from benchmarks._common import parse_setting
    from training.loop.rounds import pipeline_user, run_in_process
    from training.models import Evaluation, LoopRound

    loop_round = LoopRound.objects.select_related("reward_model").get(loop=loop, number=number)
    user = pipeline_user()
    quiet = lambda fraction, message="": None  # noqa: E731 - the runs' pages keep their progress
    policies = {}
    for variant in variants:
        name, _, settings = variant.partition(":")
        overrides = {k: parse_setting(v) for k, v in (pair.split("=", 1) for pair in settings.split())}
        run = run_in_process(
            kind=kind,
            name=f"tune {loop} {kind} {name.strip()}",
            user=user,
            progress=quiet,
            config={
                "policy_id": loop_round.start_policy_id,
                "snapshot_id": loop_round.reward_model.snapshot_id,
                "policy_name": f"tune-{loop}-{kind}-{name.strip()}",
                **overrides,
            },
        )
        policies[name.strip()] = run.summary["policy_id"]
        print(f"{name.strip()}: {run.summary['steps']} steps, held out {run.summary['held_out']}", flush=True)
    run = run_in_process(
        kind="evaluation",
        name=f"tune {loop} {kind} on dev",
        user=user,
        progress=quiet,
        config={
            "name": f"tune {loop} {kind} on dev",
            "baseline_policy_id": loop_round.start_policy_id,
            "policy_ids": ",".join(str(p) for p in policies.values()),
            "environment": dev_environment,
            "split": dev_split,
            "tasks": dev_tasks,
            "best_of_n": "",
            "samples": 2,
        },
    )
    evaluation = Evaluation.objects.get(pk=run.summary["evaluation_id"])
    by_policy = {e.policy_id: e for e in evaluation.entries.all()}
    report = {"evaluation_id": evaluation.pk, "start": by_policy[loop_round.start_policy_id].metrics}
    for name, policy_id in policies.items():
        report[name] = by_policy[policy_id].metrics
    print("\n| variant | dev success T=1 | dev success greedy |\n|---|---|---|")
    for name, metrics in report.items():
        if name != "evaluation_id":
            cells = [_cell(metrics.get(mode, {}).get("success", {}), points=False) for mode in ("sampled", "greedy")]
            print(f"| {name} | " + " | ".join(cells) + " |")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", nargs="+", default=[], help="loop names (run_pipeline --name), one per seed")
    parser.add_argument(
        "--pool",
        nargs="+",
        default=[],
        help="instead of reading loops, pool the --json reports of earlier calls (loops kept in other databases)",
    )
    parser.add_argument("--round", type=int, default=1, help="the round whose evaluation is compared")
    parser.add_argument("--json", default="", help="also write the report to this file")
    parser.add_argument("--tune", choices=["sft", "dpo"], help="choose settings on dev tasks instead (above)")
    parser.add_argument("--variant", action="append", default=[], help='with --tune: "NAME: field=value ..."')
    parser.add_argument("--dev-environment", default="encyclopedia-fresh", help="with --tune: whose dev tasks")
    parser.add_argument("--dev-tasks", type=int, default=0, help="with --tune: how many dev tasks (0: all)")
    parser.add_argument(
        "--dev-split",
        default="dev",
        help="with --tune: the split of --dev-environment played (any split of a world no stage trains on is dev data)",
    )
    args = parser.parse_args()
    if args.pool:
        report = {"loops": {}, "pooled": {}}
        for path in args.pool:
            report["loops"].update(json.loads(Path(path).read_text())["loops"])
        report = pooled_report(report)
        print_report(report)
        print(json.dumps(report, default=str))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        return
    if not args.loops:
        parser.error("--loops (or --pool) is required")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    import django

    django.setup()
    if args.tune:
        variants = args.variant or ["default:"]
        report = tune(
            args.loops[0], args.round, args.tune, variants, args.dev_environment, args.dev_tasks, args.dev_split
        )
    else:
        report = compare(args.loops, args.round)
        print_report(report)
    print(json.dumps(report, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
