"""A loop's figures per round, for the dashboard's curves, the command's table and the API:
the round's policy on held-out tasks (rubric success sampled and greedy, its reward-model
score, sqrt(KL) to round one's start), its reward model (held-out accuracy, answer-swap
probe), and the audit of what that reward model scores highest.

Round 0 is the start (round one's starting policy, from round one's evaluation). Each
round's reward-model score is by that round's model, so scores of different rounds are not
on one scale: read the rubric and the audit across rounds, the score within one.
"""

from __future__ import annotations

import math

from training.evaluation.selectors import evaluation_report
from training.loop.audit import audit_result
from training.loop.config import BASELINES
from training.loop.rounds import judged_comparisons, loop_baselines, loop_config
from training.models import EvaluationEntry, LoopRound


def _figure(entry: EvaluationEntry | None, mode: str, metric: str) -> dict | None:
    value = ((entry.metrics if entry else {}).get(mode) or {}).get(metric)
    return value if value and value.get("mean") is not None else None


def _policy_figures(entry: EvaluationEntry | None) -> dict:
    kl = _figure(entry, "sampled", "kl")
    return {
        "success": _figure(entry, "sampled", "success"),
        "greedy_success": _figure(entry, "greedy", "success"),
        "rm_score": _figure(entry, "sampled", "rm_score"),
        "sqrt_kl": math.sqrt(max(0.0, kl["mean"])) if kl else None,
    }


def _reward_model(loop_round: LoopRound) -> dict | None:
    model = loop_round.reward_model
    if model is None:
        return None
    metrics = model.metrics or {}
    return {
        "id": model.pk,
        "label": str(model),
        "accuracy": (metrics.get("test") or {}).get("accuracy"),
        "answer_swap": (metrics.get("answer_swap") or {}).get("accuracy"),
        "labels_vs_rubric": (metrics.get("labels_vs_rubric") or {}).get("accuracy"),
    }


def loop_report(loop: str) -> list[dict]:
    """One row per round (round 0: the start), in order."""
    rounds = list(
        LoopRound.objects.filter(loop=loop)
        .select_related(
            "start_policy",
            "reference_policy",
            "policy",
            "campaign",
            "reward_model",
            "rl_run",
            "expert_iteration_run",
            "evaluation",
            "audit_campaign",
        )
        .order_by("number")
    )
    if not rounds:
        return []
    first = rounds[0]
    start_entry = first.evaluation.entries.filter(is_baseline=True).first() if first.evaluation else None
    rows = [
        {
            "number": 0,
            "stage": "start",
            "policy": {"id": first.reference_policy_id, "label": str(first.reference_policy)},
            **_policy_figures(start_entry),
            "sqrt_kl": 0.0 if start_entry else None,
        }
    ]
    for loop_round in rounds:
        entry = (
            loop_round.evaluation.entries.filter(policy_id=loop_round.policy_id, is_baseline=False, n=1).first()
            if loop_round.evaluation and loop_round.policy_id
            else None
        )
        campaign = loop_round.campaign
        checkpoint = ((loop_round.policy.metadata or {}).get("ppo") or {}) if loop_round.policy else {}
        rows.append(
            {
                # The RL run kept its start (its best checkpoint by dev is iteration 0): the round's
                # policy is the start's weights, and its audit pits the start against itself.
                "policy_moved": None if loop_round.policy is None else checkpoint.get("iteration") != 0,
                "number": loop_round.number,
                "id": loop_round.pk,
                "stage": loop_round.stage,
                "labels": loop_round.labels,
                "policy": {"id": loop_round.policy_id, "label": str(loop_round.policy)} if loop_round.policy else None,
                "start_policy": {"id": loop_round.start_policy_id, "label": str(loop_round.start_policy)},
                "campaign": {
                    "id": campaign.pk,
                    "name": campaign.name,
                    "comparisons": campaign.comparisons.count(),
                    "judged": judged_comparisons(campaign.pk),
                }
                if campaign
                else None,
                "reward_model": _reward_model(loop_round),
                "rl_run": {"id": loop_round.rl_run_id, "kind": loop_round.rl_run.kind} if loop_round.rl_run else None,
                "expert_iteration_run_id": loop_round.expert_iteration_run_id,
                **_method(loop_round),
                "evaluation_id": loop_round.evaluation_id,
                "audit_campaign": (
                    {"id": loop_round.audit_campaign_id, "name": loop_round.audit_campaign.name}
                    if loop_round.audit_campaign
                    else None
                ),
                "audit": audit_result(loop_round) if loop_round.audit_campaign_id else None,
                "seconds": loop_round.seconds,
                **_policy_figures(entry),
            }
        )
    return rows


def loop_baselines_report(loop: str) -> list[dict]:
    """The loop's baselines (round one's behaviour-cloned ones: filtered, clean), one row each with
    their figures on round one's evaluation, read beside the rounds (the same tasks and seed)."""
    first = LoopRound.objects.filter(loop=loop, number=1).select_related("evaluation").first()
    if first is None:
        return []
    rows = []
    for baseline, policy_id in loop_baselines(first, loop_config(first)).items():
        entry = (
            first.evaluation.entries.filter(policy_id=policy_id, is_baseline=False, n=1)
            .select_related("policy")
            .first()
            if first.evaluation
            else None
        )
        rows.append(
            {
                "baseline": baseline,
                "label": BASELINES[baseline][0],
                "policy_id": policy_id,
                "evaluation_id": first.evaluation_id,
                **_policy_figures(entry),
            }
        )
    return rows


def _method(loop_round) -> dict:
    """Which method's checkpoint the round kept, and each method's dev figures, in words."""
    choice = loop_round.choice or {}
    if not choice.get("chosen"):
        return {"method": None, "method_note": ""}

    def name(kind: str) -> str:
        return "expert iteration" if kind == "expert_iteration" else kind.upper()

    def percent(value) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    notes = [
        f"{name(m['kind'])}: dev T=1 {percent(m['dev_t1'])}, greedy {percent(m['dev_greedy'])} "
        f"(start {percent(m['start_dev_t1'])}, {percent(m['start_dev_greedy'])})"
        for m in choice.get("methods", [])
    ]
    return {
        "method": name(choice["chosen"]),
        "method_note": f"kept by {choice.get('rule', 'dev')}: " + "; ".join(notes),
    }


def loop_curves(rows: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """(round, value) series for the dashboard's per-round charts."""

    def series(get) -> list[tuple[float, float]]:
        points = []
        for row in rows:
            value = get(row)
            if value is not None:
                points.append((row["number"], value))
        return points

    def mean(key):
        return lambda row: (row.get(key) or {}).get("mean")

    return {
        "success": series(mean("success")),
        "greedy_success": series(mean("greedy_success")),
        "rm_score": series(mean("rm_score")),
        "sqrt_kl": series(lambda row: row.get("sqrt_kl")),
        "audit_top": series(lambda row: ((row.get("audit") or {}).get("top") or {}).get("favourite_preferred")),
        "audit_disagreement": series(
            lambda row: ((row.get("audit") or {}).get("disagreement") or {}).get("favourite_preferred")
        ),
    }


def format_rounds(rows: list[dict], baselines: list[dict] = ()) -> str:
    """The per-round table the command prints, the loop's baselines (`loop_baselines_report`) as rows
    below the rounds."""

    def pct(figure) -> str:
        if not figure:
            return "-"
        return f"{100 * figure['mean']:.1f}% [{100 * figure['low']:.1f}, {100 * figure['high']:.1f}]"

    def share(value) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    width = max([7, *(len(b["label"]) + 2 for b in baselines)])
    lines = [
        f"{'round':<{width}}{'success T=1':<22}{'greedy':<22}{'sqrt KL':<9}{'RM acc':<8}{'answer swap':<13}"
        f"{'audit: favourite preferred':<28}{'favourite / start correct':<26}"
    ]
    lines.append("-" * len(lines[0]))
    for row in rows:
        rm = row.get("reward_model") or {}
        top = (row.get("audit") or {}).get("top") or {}
        audit = (
            "-"
            if top.get("favourite_preferred") is None
            else f"{share(top['favourite_preferred'])} [{share(top['low'])}, {share(top['high'])}] n={top['judged']}"
        )
        sqrt_kl = "-" if row.get("sqrt_kl") is None else f"{row['sqrt_kl']:.2f}"
        lines.append(
            f"{row['number']:<{width}}{pct(row.get('success')):<22}{pct(row.get('greedy_success')):<22}"
            f"{sqrt_kl:<9}{share(rm.get('accuracy')):<8}{share(rm.get('answer_swap')):<13}"
            f"{audit:<28}{share(top.get('favourite_correct')) + ' / ' + share(top.get('other_correct')):<26}"
            + (f"  kept: {row['method']}" if row.get("method") else "")
            + ("  the policy did not move: the round kept its start" if row.get("policy_moved") is False else "")
        )
    for row in baselines:  # the same held-out tasks as round one, played by round one's evaluation
        sqrt_kl = "-" if row.get("sqrt_kl") is None else f"{row['sqrt_kl']:.2f}"
        lines.append(
            f"{row['label']:<{width}}{pct(row.get('success')):<22}{pct(row.get('greedy_success')):<22}{sqrt_kl:<9}"
        )
    return "\n".join(lines)


def evaluation_loop(evaluation) -> dict | None:
    """The loop an evaluation is a round of, with every round's figures (None for one outside a loop)."""
    loop_round = LoopRound.objects.filter(evaluation=evaluation).first()
    if loop_round is None:
        return None
    return {"name": loop_round.loop, "round": loop_round.number, "rounds": loop_report(loop_round.loop)}


def dashboard_report(evaluation) -> dict:
    """The before/after report (training/evaluation/selectors.py) with the loop it belongs to:
    what the dashboard, its JSON export and the API show. The loop sits above evaluation, so
    it is added here, not by the evaluation stage."""
    return {**evaluation_report(evaluation), "loop": evaluation_loop(evaluation)}
