"""The whole loop, headless: behaviour-cloned policy -> rollouts -> comparisons -> simulated
annotators -> snapshot -> reward model -> best-of-n and PPO -> evaluation.

Every training stage is a run of the run machinery (launched, then executed in this
process), so what the pipeline made shows on the run pages with its lineage, and the final
evaluation is an ordinary before/after dashboard. `python manage.py run_pipeline` drives it.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from annotate.models import Campaign, Policy
from annotate.services.datasets import SnapshotFilters, snapshot_create
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.kinds import config_from_input, get_kind
from webapp.runs.services import run_execute, run_launch

Progress = Callable[[float, str], None]


@dataclass
class PipelineConfig:
    name: str = ""  # prefix of everything the pipeline creates (default: pipeline-<time>)
    environment: str = "encyclopedia"  # every stage plays this environment (docs/environments.md)
    policy_id: int = 0  # the policy to improve (0: the default behaviour-cloned policy, trained if missing)
    rollout_tasks: int = 431  # training tasks the policy is rolled out on (431: all of them)
    samples_per_task: int = 2  # episodes per task, paired into comparisons
    annotators: int = 3  # simulated annotators, each voting once on every comparison
    annotator_temperature: float = 1.0  # Bradley-Terry temperature over the rubric utility
    annotator_flip: float = 0.05  # share of labels each simulated annotator flips
    annotator_correct_first: bool = True  # a correct answer beats any wrong one, as a person checking answers judges;
    # steps, tool errors and loops (the rubric's weights) decide between equally correct ones
    annotator_correct_weight: float = 30.0  # without correct_first: the utility of a correct answer (the rubric's is 10)
    reward_model: dict = field(default_factory=dict)  # reward_model run config overrides
    ppo: dict = field(default_factory=dict)  # ppo run config overrides
    upper_bound: bool = False  # also PPO against the rubric itself, evaluated beside the rest
    best_of_n: str = "4"  # best-of-n over the starting policy at these n
    eval_tasks: int = 0  # eval tasks (0: all 124)
    eval_samples: int = 2  # sampled episodes per eval task and system
    seed: int = 0


@dataclass
class PipelineResult:
    policy: Policy
    campaign: Campaign
    runs: dict[str, Run]
    evaluation: object
    seconds: dict[str, float]


def pipeline_user():
    """The user every pipeline run is launched by (it cannot log in)."""
    user, created = get_user_model().objects.get_or_create(username="pipeline", defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def run_in_process(*, kind: str, config: dict, name: str, user, progress: Progress) -> Run:
    """Launch a run (refused configs raise ArbiterError) and execute it here, reporting its progress."""
    run = run_launch(kind=kind, config=config, user=user, name=name, enqueue=False)

    def execute() -> None:
        try:
            run_execute(run_id=run.pk, attempt=run.attempt)
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=execute, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(timeout=0.5)
        current = Run.objects.only("progress", "progress_message").get(pk=run.pk)
        progress(current.progress, current.progress_message)
    run.refresh_from_db()
    if run.status != Run.Status.SUCCEEDED:
        raise ArbiterError(f"The {kind} run #{run.pk} {run.status}: {run.error or run.progress_message}")
    progress(1.0, "done")
    return run


def run_pipeline(config: PipelineConfig, *, stage: Callable[[str], Progress],
                 log: Callable[[str], None] = print) -> PipelineResult:
    """Run every stage; `stage(title)` gives the progress callback of the stage starting."""
    from django.conf import settings

    from training.envs.encyclopedia.rubric import RubricWeights
    from training.policy.bc_config import BCConfig
    from training.policy.services import DEFAULT_POLICY, policy_train_default
    from training.services import campaign_simulate_labels
    from training.simulated_annotators import AnnotatorProfile

    name = config.name or f"pipeline-{timezone.now():%Y%m%d-%H%M%S}"
    if Campaign.objects.filter(name=f"{name} comparisons").exists():
        raise ArbiterError(f"A pipeline named {name!r} ran already; choose another --name.")
    user = pipeline_user()
    seconds: dict[str, float] = {}
    runs: dict[str, Run] = {}
    clock = time.monotonic()

    def timed(label: str) -> None:
        nonlocal clock
        seconds[label] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()

    step = stage("1/7 behaviour-cloned policy")
    if config.policy_id:
        policy = Policy.objects.filter(pk=config.policy_id).first()
        if policy is None:
            raise ArbiterError(f"No policy with id {config.policy_id}.")
    else:
        own = DEFAULT_POLICY if config.environment == "encyclopedia" else f"{DEFAULT_POLICY}-{config.environment}"
        policy = policy_train_default(config=BCConfig(environment=config.environment), name=own,
                                      target=settings.VAR_DIR / "policies" / own,
                                      progress=lambda f: step(f, "behaviour cloning"), log=log)
    step(1.0, f"{policy}")
    timed("policy")

    campaign = Campaign.objects.create(name=f"{name} comparisons", votes_per_comparison=config.annotators,
                                       created_by=user,
                                       guidelines="Comparisons of the policy's own episodes, labelled by simulated "
                                                  "annotators for the pipeline.")
    runs["rollout"] = run_in_process(kind="rollout", name=f"{name} rollouts", user=user, progress=stage(
        "2/7 rollouts and comparisons"), config={
        "policy_id": policy.pk, "environment": config.environment, "split": "train", "tasks": config.rollout_tasks,
        "samples_per_task": config.samples_per_task, "temperature": 1.0, "campaign_id": campaign.pk,
        "seed": config.seed})
    timed("rollouts")

    step = stage("3/7 simulated annotators")
    total = campaign.comparisons.count() * config.annotators
    profile = AnnotatorProfile(temperature=config.annotator_temperature, flip=config.annotator_flip,
                               weights=replace(RubricWeights(), correct=config.annotator_correct_weight),
                               correct_first=config.annotator_correct_first)
    made = 0
    while True:
        batch = campaign_simulate_labels(campaign=campaign, annotators=config.annotators, profile=profile,
                                         seed=config.seed + made, limit=200)
        made += batch
        step(min(1.0, made / max(1, total)), f"{made} judgements")
        if batch < 200:
            break
    timed("labels")

    step = stage("4/7 dataset snapshot")
    snapshot = snapshot_create(name=f"{name} snapshot", campaigns=[campaign], seed=config.seed, test_fraction=0.2,
                               filters=SnapshotFilters(include_synthetic=True), created_by=user)
    step(1.0, ", ".join(f"{k} {v}" for k, v in snapshot.stats.items() if isinstance(v, int)) or "built")
    timed("snapshot")

    runs["reward_model"] = run_in_process(kind="reward_model", name=f"{name} reward model", user=user,
                                          progress=stage("5/7 reward model"), config={
        "snapshot_id": snapshot.pk, "name": f"{name}-rm", "eval_policy_id": policy.pk,
        "tokenizer_dir": policy.model_dir, "seed": config.seed, **config.reward_model})
    reward_model_id = runs["reward_model"].summary["reward_model_id"]
    timed("reward_model")

    ppo = {"policy_id": policy.pk, "environment": config.environment, "reward": "reward_model", "reward_model_id": reward_model_id,
           "policy_name": f"{name}-ppo", "seed": config.seed, **config.ppo}
    runs["ppo"] = run_in_process(kind="ppo", name=f"{name} PPO", user=user, progress=stage("6/7 PPO"), config=ppo)
    timed("ppo")
    extra = ""
    if config.upper_bound:
        runs["ppo_rubric"] = run_in_process(
            kind="ppo", name=f"{name} PPO on the rubric", user=user, progress=stage("6b/7 PPO on the rubric"),
            config={**ppo, "reward": "rubric", "reward_model_id": 0, "policy_name": f"{name}-ppo-rubric"})
        extra = str(runs["ppo_rubric"].summary["best_policy_id"] or runs["ppo_rubric"].summary["last_policy_id"] or "")
        timed("ppo_rubric")

    runs["evaluation"] = run_in_process(kind="evaluation", name=f"{name} evaluation", user=user,
                                        progress=stage("7/7 best-of-n and evaluation"), config={
        "name": name, "environment": config.environment, "baseline_policy_id": policy.pk,
        "ppo_run_id": runs["ppo"].pk, "policy_ids": extra,
        "reward_model_id": reward_model_id, "best_of_n": config.best_of_n, "split": "eval",
        "tasks": config.eval_tasks, "samples": config.eval_samples, "seed": config.seed})
    timed("evaluation")
    from training.models import Evaluation

    evaluation = Evaluation.objects.get(pk=runs["evaluation"].summary["evaluation_id"])
    return PipelineResult(policy=policy, campaign=campaign, runs=runs, evaluation=evaluation, seconds=seconds)


def before_after_rows(evaluation) -> list[dict]:
    """The before/after table: one row per system and mode, each metric as (mean, low, high)."""
    rows = []
    for entry in evaluation.entries.all():
        for mode in ("sampled", "greedy"):
            figures = entry.metrics.get(mode)
            if figures:
                rows.append({"system": entry.label, "mode": mode, **{
                    metric: (value["mean"], value["low"], value["high"]) for metric, value in figures.items()
                    if value.get("mean") is not None}})
    return rows


def format_table(rows: list[dict]) -> str:
    columns = [("success", "success", True), ("f1", "F1", True), ("quote_support", "quotes", True),
               ("rm_score", "RM score", False), ("steps", "steps", False), ("tool_errors", "tool errors", False),
               ("kl", "KL", False)]
    width = max(len(r["system"]) for r in rows) + 2 if rows else 10

    def cell(value, percent: bool) -> str:
        if value is None:
            return "-"
        mean, low, high = value
        if percent:
            return f"{100 * mean:5.1f}% [{100 * low:4.1f}, {100 * high:4.1f}]"
        return f"{mean:6.2f} [{low:5.2f}, {high:5.2f}]"

    header = f"{'system':<{width}}{'mode':<9}" + "".join(f"{label:<22}" for _, label, _ in columns)
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row['system']:<{width}}{row['mode']:<9}" +
                     "".join(f"{cell(row.get(key), percent):<22}" for key, _, percent in columns))
    return "\n".join(lines)


def pipeline_problems(config: PipelineConfig) -> list[str]:
    from training.envs.services import environment_problems

    problems = environment_problems(config.environment)
    if config.rollout_tasks < 10:
        problems.append("rollout_tasks: at least 10 (the reward model needs pairs).")
    if config.samples_per_task < 2:
        problems.append("samples_per_task: at least 2 (comparisons pair a task's episodes).")
    if config.annotators < 1:
        problems.append("annotators: at least 1.")
    try:  # the PPO settings are known now; the ids they refer to are checked when each run launches
        config_from_input(get_kind("ppo").config_class, config.ppo)
    except ValueError as exc:
        problems.append(f"PPO settings: {' '.join(str(exc).splitlines())}")
    return problems

