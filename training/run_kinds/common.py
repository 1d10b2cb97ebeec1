"""What the agent side's run kinds share: policy choices, checks and lineage links."""

from __future__ import annotations

from pathlib import Path

from django.urls import reverse

from annotate.models import Campaign, Policy
from training.envs.services import environment_choices as choices
from training.envs.services import (
    environment_get,
    environment_problems,
    environments_here,
    parse_task_ids,
    task_problems,
)
from training.rl.services import best_checkpoint_mark
from webapp.models import Run
from webapp.runs.lineage import lineage_link
from webapp.runs.services import run_add_lineage

SPLITS = ("train", "dev", "eval")
ENVIRONMENT_HELP = (
    "The environment (a built-in, an installed entry point, one configured in "
    "ARBITER_ENVIRONMENTS_FILE, or package.module:Class); docs/environments.md."
)
TASK_IDS_HELP = "Only these tasks of the split, by external id, separated by commas (empty: the first `tasks`)."


def environment_check(name: str, split: str | None = None, task_ids: str = "") -> list[str]:
    """Why a run cannot use this environment (unknown, fails to start) or these tasks (not of its
    split). In the web process, from its name only: the worker checks the rest when the run starts."""
    problems = environment_problems(name)
    if not problems and split and task_ids and environments_here():
        problems = task_problems(environment_get(name), split, parse_task_ids(task_ids))
    return problems


def environment_choices() -> list[tuple[str, str]]:

    return choices()


def policy_choices() -> list[tuple[int, str]]:
    """Every policy with a model, the one a form starts on first (a browser submits the first option
    of a select whose value is not among them): policies made by no run or by a run that succeeded,
    an RL run's checkpoints only at its best, newest first; then the other checkpoints of succeeded
    runs; last, and labelled so, the policies of runs that failed, were cancelled or still run (a
    cancelled PPO run's step-0 checkpoint is never the one a form starts on)."""
    policies = Policy.objects.exclude(model_dir="").select_related("run").order_by("-created_at")[:200]
    ranked = [(*_rank(p), p.pk) for p in policies]  # already newest first; a stable sort keeps that
    return [(pk, label) for _, label, pk in sorted(ranked, key=lambda row: row[0])]


def _rank(policy: Policy) -> tuple[int, str]:
    """(rank, label): rank 0 a form may start on, 1 an RL run's other checkpoints, 2 a policy of a
    run that did not succeed (its label says so)."""
    run, label = policy.run, str(policy)
    if run is not None and run.status != "succeeded":
        return 2, f"{label} (run #{run.pk} {run.status})"
    checkpoint = policy.metadata.get("ppo") if isinstance(policy.metadata, dict) else None
    if isinstance(checkpoint, dict) and not checkpoint.get("best"):
        return 1, label
    return 0, label


def campaign_choices() -> list[tuple[int, str]]:
    return [(0, "(none)")] + [(c.pk, c.name) for c in Campaign.objects.order_by("-created_at")[:200]]


def policy_problems(policy_id: int) -> list[str]:
    policy = Policy.objects.filter(pk=policy_id).first()
    if policy is None:
        return [f"No policy with id {policy_id}."]
    if not policy.model_dir or not (Path(policy.model_dir) / "config.json").exists():
        return [f"Policy {policy} has no model directory on disk ({policy.model_dir or 'none set'})."]
    return []


def policy_link(policy_id: int, direction: str = "input") -> dict:
    policy = Policy.objects.get(pk=policy_id)
    url = reverse("training:policy", args=[policy.pk])
    return lineage_link("policy", policy.pk, policy, url, direction=direction)


def checkpoints_lineage_add(*, run, name: str, best: int | None) -> tuple[Policy | None, object]:
    """Flag a run's best checkpoint (iteration or round `best`) among its policies called `name`,
    and add every checkpoint, an earlier attempt's too, to its outputs once. Returns (the best
    checkpoint's policy, the run's checkpoints in order)."""
    chosen = best_checkpoint_mark(name=name, iteration=best)
    already = {link["id"] for link in Run.objects.get(pk=run.pk).lineage if link.get("direction") == "output"}
    outputs = Policy.objects.filter(name=name).order_by("version")
    run_add_lineage(
        run=run,
        links=[
            policy_link(p.pk, "output")
            | ({"label": f"{p} (best by dev success where deployed)"} if chosen and p.pk == chosen.pk else {})
            for p in outputs
            if p.pk not in already
        ],
    )
    return chosen, outputs
