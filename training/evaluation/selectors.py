"""Reads for the before/after dashboards.

`evaluation_report` is the one description of an evaluation that the page, the JSON and CSV
exports and the API all render, so they never disagree: the config, every system's figures
per mode, each system's success against the baseline with a paired interval, the human
evaluations with their win rates, and the curves of the PPO runs whose checkpoints appear.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict

from django.core.paginator import Page, Paginator
from django.db.models import Count, QuerySet

from annotate.models import Policy, Trajectory
from training.evaluation.behaviour import evaluation_behaviour, situation_expression
from training.evaluation.episodes import paired_difference
from training.evaluation.services import human_evaluation_result
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode
from webapp.models import Run
from webapp.runs.selectors import run_metric_series

MODES = tuple(EvaluationEpisode.Mode.values)  # sampled, then greedy
# The table's columns, in the order the page shows them.
METRICS = ("success", "f1", "quote_support", "rm_score", "steps", "tool_errors", "kl")
FIGURE_FIELDS = ("mean", "low", "high", "tasks", "episodes")
PAIRS_PER_PAGE = 10


def evaluations_list() -> QuerySet[Evaluation]:
    """Newest first, with the number of systems."""
    return (
        Evaluation.objects.select_related("run", "reference_policy")
        .annotate(n_systems=Count("entries"))
        .order_by("-created_at")
    )


def evaluations_for_policy(*, policy: Policy) -> QuerySet[Evaluation]:
    """Evaluations in which the policy is one of the systems."""
    return Evaluation.objects.filter(entries__policy=policy).distinct().order_by("-created_at")


def _policy_ref(policy: Policy | None) -> dict | None:
    if policy is None:
        return None
    return {"id": policy.pk, "name": policy.name, "version": policy.version, "label": str(policy)}


def _outcomes(evaluation: Evaluation) -> dict[tuple[int, str], dict[int, list[float]]]:
    """(entry id, mode) -> task id -> rubric success of each episode."""
    found: dict[tuple[int, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    rows = (
        EvaluationEpisode.objects.filter(entry__evaluation=evaluation)
        .order_by("entry_id", "mode", "task_id", "sample")
        .values_list("entry_id", "mode", "task_id", "correct")
    )
    for entry_id, mode, task_id, correct in rows:
        found[(entry_id, mode)][task_id].append(float(correct))
    return found


def _success_difference(baseline: dict[int, list[float]], other: dict[int, list[float]]) -> dict | None:
    """Mean over the tasks both played of (other - baseline) success, with its paired interval."""
    tasks = sorted(set(baseline) & set(other))
    if not tasks:
        return None
    return paired_difference([baseline[t] for t in tasks], [other[t] for t in tasks])


COLLAPSE_POINTS = 0.05  # a checkpoint this far below the start, with its interval below 0, is flagged as a collapse


def _collapsed(difference: dict) -> bool:
    """Whether a system's success is clearly far below the start's in some mode."""
    return any(
        d.get("mean") is not None and d["mean"] < -COLLAPSE_POINTS and (d.get("high") or 0) < 0
        for d in difference.values()
    )


def _system(
    entry: EvaluationEntry,
    baseline: EvaluationEntry | None,
    outcomes: dict,
    last_checkpoints: frozenset[int] = frozenset(),
) -> dict:
    ppo = (entry.policy.metadata or {}).get("ppo")
    metrics = {
        mode: {
            name: {k: entry.metrics[mode][name].get(k) for k in FIGURE_FIELDS}
            for name in METRICS
            if name in entry.metrics[mode]
        }
        for mode in MODES
        if mode in entry.metrics
    }
    difference = {}
    if baseline is not None and entry.pk != baseline.pk:
        for mode in metrics:
            found = _success_difference(outcomes.get((baseline.pk, mode), {}), outcomes.get((entry.pk, mode), {}))
            if found is not None:
                difference[mode] = found
    return {
        "id": entry.pk,
        "label": entry.label,
        "name": row_name(entry),
        "kind": entry.kind,
        "method": _method(entry, baseline.policy_id if baseline is not None else None),
        "n": entry.n,
        "is_baseline": entry.is_baseline,
        "policy": _policy_ref(entry.policy),
        "ppo": {
            "run_id": ppo.get("run_id") or entry.policy.run_id,
            "iteration": ppo.get("iteration"),
            "best": bool(ppo.get("best")),
            "last": entry.policy_id in last_checkpoints,
            "collapsed": bool((ppo.get("dev") or {}).get("collapsed")),
        }
        if ppo
        else None,
        "metrics": metrics,
        "success_vs_baseline": difference,
        "collapsed": _collapsed(difference),
        "reward_rose": _reward_rose(entry, baseline),
    }


def _reward_rose(entry: EvaluationEntry, baseline: EvaluationEntry | None) -> bool | None:
    """Whether the reward-model score of the system's sampled episodes is above the start's
    (None where either has none): what a collapse note may say of reward hacking."""
    if baseline is None:
        return None
    mine = ((entry.metrics or {}).get("sampled") or {}).get("rm_score", {}).get("mean")
    start = ((baseline.metrics or {}).get("sampled") or {}).get("rm_score", {}).get("mean")
    return None if mine is None or start is None else mine > start


def row_name(entry: EvaluationEntry) -> str:
    """A table row's name without what its badges say: the stored label "X (start)" sits beside a
    "start" badge, "best-of-4 over X" beside "best-of-4" (issue 53); the label itself is kept for
    the API and the logs."""
    name = entry.label.replace(f"best-of-{entry.n} over ", "") if entry.n else entry.label
    return name.replace(" (start)", "").replace(", best on dev", "")


def _method(entry: EvaluationEntry, baseline_policy_id: int | None = None) -> str:
    """How the system was made, in a word: start, best-of-n, the start at its best temperature,
    SFT, DPO, PPO, RLOO, GRPO, expert iteration, behaviour cloning (with what it imitated) or
    policy."""
    metadata = entry.policy.metadata or {}
    if entry.is_baseline:
        return "start"
    if entry.kind == EvaluationEntry.Kind.BEST_OF_N:
        return f"best-of-{entry.n}"
    if baseline_policy_id is not None and entry.policy_id == baseline_policy_id:
        return "start at its best T"  # the baseline's own policy, played at its best temperature on dev
    if metadata.get("ppo", {}).get("method") == "expert_iteration":
        return "expert iteration"
    if "finetune" in metadata:
        return str(metadata["finetune"].get("kind", "")).upper() or "policy"
    if "ppo" in metadata:
        run = entry.policy.run
        return (run.kind if run is not None else "ppo").upper()
    if "bc" in metadata:
        return _bc_method(metadata.get("config") or {})
    return "policy"


# How a behaviour-cloning baseline's demonstrator differs from the default one (BCConfig.demonstrator).
BC_DEMONSTRATORS = {
    "clean": "on a clean demonstrator (no habits, no slips)",
    "random": "on a demonstrator with random slips only (no habits)",
}


def _bc_method(config: dict) -> str:
    """A behaviour-cloned policy's method, saying what it imitated when that was not every episode
    of the default demonstrator: "behaviour cloning, successful demonstrations only (filtered)"."""
    parts = ["behaviour cloning"]
    if config.get("demonstrator") in BC_DEMONSTRATORS:
        parts.append(BC_DEMONSTRATORS[config["demonstrator"]])
    if config.get("demonstrations") == "successful":
        parts.append("successful demonstrations only (filtered)")
    return ", ".join(parts)


def _verdict(difference: dict, a: str, b: str) -> str:
    """Which of two systems wins on success, from the paired interval of (b - a)."""
    if difference.get("low") is not None and difference["low"] > 0:
        return b
    if difference.get("high") is not None and difference["high"] < 0:
        return a
    return ""


def head_to_head(systems: list[dict], outcomes: dict) -> list[dict]:
    """Every pair of systems other than the start, per mode: the paired difference in success on
    the tasks both played (b - a, with its 95% interval over tasks) and which wins, if either
    does clearly; "" when the interval holds 0."""
    others = [s for s in systems if not s["is_baseline"]]
    rows = []
    for mode in MODES:
        for i, a in enumerate(others):
            for b in others[i + 1 :]:
                found = _success_difference(outcomes.get((a["id"], mode), {}), outcomes.get((b["id"], mode), {}))
                if found is None:
                    continue
                rows.append(
                    {
                        "mode": mode,
                        "a": {"id": a["id"], "label": a["label"], "name": a["name"], "method": a["method"]},
                        "b": {"id": b["id"], "label": b["label"], "name": b["name"], "method": b["method"]},
                        "difference": found,
                        "winner": _verdict(found, a["label"], b["label"]),
                    }
                )
    return rows


def _human_evaluations(evaluation: Evaluation) -> list[dict]:
    rows = evaluation.human_evaluations.select_related("campaign", "baseline", "candidate").order_by("created_at")
    return [
        {
            "id": h.pk,
            "campaign": {"id": h.campaign_id, "name": h.campaign.name},
            "baseline": {"id": h.baseline_id, "label": h.baseline.label},
            "candidate": {"id": h.candidate_id, "label": h.candidate.label},
            "mode": h.mode,
            "votes_per_comparison": h.campaign.votes_per_comparison,
            "created_at": h.created_at.isoformat(),
            "result": human_evaluation_result(h),
        }
        for h in rows
    ]


def _points(points: list[tuple[int, float | None]], transform=float) -> list[list]:
    return [[step, transform(value)] for step, value in points if isinstance(value, (int, float))]


def _dev_interval(dev: dict) -> dict | None:
    if dev.get("success") is None:
        return None
    return {
        "success": dev["success"],
        "low": dev.get("success_low"),
        "high": dev.get("success_high"),
        "episodes": dev.get("episodes"),
        "greedy": dev.get("greedy_success"),
        "greedy_low": dev.get("greedy_low"),
        "greedy_high": dev.get("greedy_high"),
    }


def _ppo_run(run: Run, evaluated: dict[int, int]) -> dict:
    """A PPO run's curves (reward-model score, dev rubric success, sqrt(KL) per iteration), its
    checkpoints and the iterations where over-optimization was flagged."""
    series = run_metric_series(run)
    checkpoints = sorted(
        Policy.objects.filter(run=run, metadata__ppo__isnull=False),
        key=lambda p: p.metadata["ppo"].get("iteration") or 0,
    )
    best = next((p for p in checkpoints if p.metadata["ppo"].get("best")), None)
    return {
        "run_id": run.pk,
        "name": run.name,
        "status": run.status,
        # What `objective/rm_score` scored: the learnt reward model, or the rubric (the upper bound).
        "reward": next((p.metadata["ppo"].get("reward") for p in checkpoints), None) or "reward_model",
        "curves": {
            "rm_score": _points(series.get("objective/rm_score", [])),
            "dev_success": _points(series.get("eval/dev_success", [])),
            # The per-episode KL estimate can dip below zero on a batch; its root is read as 0 there.
            "sqrt_kl": _points(series.get("objective/kl", []), lambda v: math.sqrt(max(float(v), 0.0))),
        },
        "best_iteration": best.metadata["ppo"].get("iteration") if best else None,
        # The chosen checkpoint's dev success with its 95% interval (checkpoints saved before
        # intervals were recorded have none).
        "best_dev": _dev_interval(best.metadata["ppo"].get("dev") or {}) if best else None,
        "best_policy_id": best.pk if best else None,
        "last_policy_id": checkpoints[-1].pk if checkpoints else None,
        # Why the run stopped ("collapse": dev success fell far below the start's, training/rl/trainer.py).
        "stop_reason": (run.summary or {}).get("stop_reason"),
        "message": (run.summary or {}).get("message"),
        "overoptimization": [step for step, value in series.get("eval/overoptimization", []) if value],
        "checkpoints": [
            {
                "policy": _policy_ref(p),
                "iteration": p.metadata["ppo"].get("iteration"),
                "dev_success": (p.metadata["ppo"].get("dev") or {}).get("success"),
                "best": bool(p.metadata["ppo"].get("best")),
                "entry_id": evaluated.get(p.pk),
            }
            for p in checkpoints
        ],
    }


SEEN_MODES = {"sampled": "seen_sampled", "greedy": "seen_greedy"}  # each mode's twin on the world trained on


def _success_mean(entry: EvaluationEntry, mode: str) -> float | None:
    return ((entry.metrics or {}).get(mode) or {}).get("success", {}).get("mean")


def memorisation_rows(entries: list[EvaluationEntry], baseline: EvaluationEntry | None) -> list[dict]:
    """Per policy played on both worlds: success on the unseen world and on held-out tasks of
    the world it trained on, sampled and greedy, and each one's change from the start (a
    difference of means, in points). A gain only on the seen world is memorisation."""
    rows = []
    for entry in entries:
        if not any(m in (entry.metrics or {}) for m in SEEN_MODES.values()):
            continue
        row = {
            "id": entry.pk,
            "label": entry.label,
            "name": row_name(entry),
            "is_baseline": entry.is_baseline,
            "modes": [],
        }
        for mode, seen_mode in SEEN_MODES.items():  # sampled, then greedy: the page's column groups
            unseen, seen = _success_mean(entry, mode), _success_mean(entry, seen_mode)
            figures = {"mode": mode, "unseen": unseen, "seen": seen, "gain_unseen": None, "gain_seen": None}
            if baseline is not None and not entry.is_baseline:
                start_unseen, start_seen = _success_mean(baseline, mode), _success_mean(baseline, seen_mode)
                if None not in (unseen, start_unseen):
                    figures["gain_unseen"] = 100 * (unseen - start_unseen)
                if None not in (seen, start_seen):
                    figures["gain_seen"] = 100 * (seen - start_seen)
            row["modes"].append(figures)
        rows.append(row)
    return rows


def evaluation_report(evaluation: Evaluation) -> dict:
    """Everything the dashboard shows, as plain JSON values."""
    entries = list(evaluation.entries.select_related("policy__run"))
    baseline = next((e for e in entries if e.is_baseline), None)
    outcomes = _outcomes(evaluation)
    run_ids = sorted(
        {
            (e.policy.metadata or {}).get("ppo", {}).get("run_id") or e.policy.run_id
            for e in entries
            if (e.policy.metadata or {}).get("ppo")
        }
        - {None}
    )
    runs = [
        _ppo_run(run, {e.policy_id: e.pk for e in entries}) for run in Run.objects.filter(pk__in=run_ids).order_by("pk")
    ]
    last = frozenset(r["last_policy_id"] for r in runs if r["last_policy_id"])
    systems = [_system(e, baseline, outcomes, last) for e in entries]
    reward_model = evaluation.reward_model
    return {
        "id": evaluation.pk,
        "name": evaluation.name,
        "split": evaluation.split,
        "created_at": evaluation.created_at.isoformat(),
        "run_id": evaluation.run_id,
        "reference_policy": _policy_ref(evaluation.reference_policy),
        "reward_model": {"id": reward_model.pk, "label": str(reward_model), "snapshot_id": reward_model.snapshot_id}
        if reward_model
        else None,
        "config": evaluation.config,
        "modes": [m for m in MODES if any(m in s["metrics"] for s in systems)],
        "metrics": list(METRICS),
        "baseline_id": baseline.pk if baseline else None,
        "systems": systems,
        "head_to_head": head_to_head(systems, outcomes),
        "memorisation": memorisation_rows(entries, baseline),
        "human_evaluations": _human_evaluations(evaluation),
        "rl_runs": runs,
        "behaviour": evaluation_behaviour(evaluation, systems=systems),
    }


CSV_COLUMNS = ("system", "entry_id", "kind", "n", "is_baseline", "policy_id", "mode", "metric", *FIGURE_FIELDS)


def evaluation_report_csv(report: dict) -> str:
    """One row per (system, mode, metric); the success difference against the baseline is the
    metric `success_vs_baseline`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for system in report["systems"]:
        head = [
            system["label"],
            system["id"],
            system["kind"],
            system["n"],
            system["is_baseline"],
            system["policy"]["id"],
        ]
        for mode in report["modes"]:
            figures = dict(system["metrics"].get(mode, {}))
            if mode in system["success_vs_baseline"]:
                figures["success_vs_baseline"] = system["success_vs_baseline"][mode]
            for metric, figure in figures.items():
                writer.writerow([*head, mode, metric, *(figure.get(k) for k in FIGURE_FIELDS)])
    return out.getvalue()


def evaluation_pairs_page(
    *,
    baseline: EvaluationEntry,
    candidate: EvaluationEntry,
    mode: str,
    differ: bool,
    page: str | int | None,
    situation: str = "",
) -> tuple[Page, int]:
    """One page of tasks both systems played in `mode`: sample 0 of each side
    ({task, before, after, differ}, trajectories loaded for this page only), and how many
    tasks there are before the `differ` filter (outcome: correct against not). `situation`:
    only the tasks in that situation (behaviour.situation_expression), when given."""
    episodes = (
        EvaluationEpisode.objects.filter(entry__in=[baseline, candidate], mode=mode, sample=0)
        .select_related("task")
        .defer("task__metadata")
    )
    if situation:
        episodes = episodes.annotate(situation=situation_expression()).filter(situation=situation)
    sides: dict[int, dict] = defaultdict(dict)
    for episode in episodes:
        sides[episode.task_id]["before" if episode.entry_id == baseline.pk else "after"] = episode
    rows = [
        {
            "task": pair["before"].task,
            "before": pair["before"],
            "after": pair["after"],
            "differ": pair["before"].correct != pair["after"].correct,
        }
        for _, pair in sorted(sides.items())
        if len(pair) == 2
    ]
    total = len(rows)
    if differ:
        rows = [row for row in rows if row["differ"]]
    shown = Paginator(rows, PAIRS_PER_PAGE).get_page(page)
    trajectories = Trajectory.objects.in_bulk(
        [r[side].trajectory_id for r in shown.object_list for side in ("before", "after")]
    )
    for row in shown.object_list:
        for side in ("before", "after"):
            row[side].trajectory = trajectories[row[side].trajectory_id]
    return shown, total


def evaluation_default_candidate(evaluation: Evaluation) -> EvaluationEntry | None:
    """The system the side-by-side view opens on: the PPO checkpoint best by dev rubric, else the
    first system that is not the baseline."""
    others = list(evaluation.entries.filter(is_baseline=False).select_related("policy"))
    best = next((e for e in others if ((e.policy.metadata or {}).get("ppo") or {}).get("best")), None)
    return best or (others[0] if others else None)
