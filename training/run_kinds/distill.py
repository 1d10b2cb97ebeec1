"""The `expert_iteration` run kind: best-of-n distillation of a policy (training/rl/expert_iteration.py),
from the web UI, the REST API or the loop, on a worker, with progress, cancel, resume and lineage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from annotate.models import Policy
from core.callbacks import RLCallbacks
from rewardmodel.models import RewardModel
from training.envs.base import FRESH_WORLD_SEED
from training.envs.services import environment_world, environments_here
from training.rl.config import ExpertIterationConfig
from training.rl.services import expert_iteration_train
from training.run_kinds.common import (
    ENVIRONMENT_HELP,
    checkpoints_lineage_add,
    environment_check,
    environment_choices,
    policy_choices,
    policy_link,
    policy_problems,
)
from training.run_kinds.improve import (
    _reward_model_choices,
    _reward_model_link,
    newest_reward_model,
    reward_model_missing,
    reward_model_problems,
)
from webapp.runs.kinds import RunKind, register
from webapp.runs.services import RunCancelled, run_add_artifact, run_dir


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class ExpertIterationRunConfig(ExpertIterationConfig):
    policy_id: int = field(default=0, metadata=_help("The policy to improve."))
    environment: str = field(default="encyclopedia", metadata=_help(ENVIRONMENT_HELP))
    reward_model_id: int = field(
        default=0, metadata=_help("The reward model that chooses the favourites (selection reward_model or majority).")
    )
    fresh_worlds: bool = field(
        default=True,
        metadata=_help(
            "Each round's tasks from a newly generated world of the environment (training/envs/worlds.py), so "
            "memorising names cannot pay (an environment not built per seed is refused: turn it off); off: its "
            "training tasks."
        ),
    )
    anchor: bool = field(
        default=True,
        metadata=_help(
            "Mix the environment's scripted demonstrations in (anchor_mix per kept episode), where it has them."
        ),
    )
    dev_environment: str = field(
        default="",
        metadata=_help("Whose dev tasks judge each round (empty: the environment's fresh variant where it has one)."),
    )
    dev_tasks: int = field(default=100, metadata=_help("At most this many dev tasks, a fixed sample (0: all)."))
    policy_name: str = field(
        default="exit", metadata=_help("Each round's checkpoint is a policy named NAME-runID@iter-NNNN.")
    )

    def expert_iteration_config(self) -> ExpertIterationConfig:
        return ExpertIterationConfig(**{f.name: getattr(self, f.name) for f in fields(ExpertIterationConfig)})

    def validate(self) -> list[str]:
        problems = super().validate()
        if not self.policy_name.strip() or "/" in self.policy_name or self.policy_name.startswith("."):
            problems.append("policy_name: a plain name (letters, digits, dashes).")
        if self.dev_tasks < 0:
            problems.append("dev_tasks: 0 (all) or more.")
        return problems


def _check(config: ExpertIterationRunConfig) -> list[str]:

    problems = policy_problems(config.policy_id) + environment_check(config.environment)
    if config.dev_environment:
        problems += [f"dev_environment: {p}" for p in environment_check(config.dev_environment, "dev")]
    if config.selection != "rubric":
        if not config.reward_model_id:
            problems.append(reward_model_missing(f"selection {config.selection} needs a reward model (or 'rubric')"))
        elif not problems:
            problems += reward_model_problems(config.reward_model_id, config.environment)
    if config.fresh_worlds and not problems and environments_here():
        try:
            environment_world(config.environment, FRESH_WORLD_SEED - 1)
        except Exception as exc:  # noqa: BLE001 - an environment that takes no seed fails in its own way
            problems.append(f"fresh_worlds: {config.environment} cannot be built per seed ({exc}); turn it off.")
    return problems


def _lineage(config: ExpertIterationRunConfig) -> list[dict]:
    links = [policy_link(config.policy_id)]
    if config.selection != "rubric" and config.reward_model_id:
        links += _reward_model_link(RewardModel.objects.select_related("snapshot").get(pk=config.reward_model_id))
    return links


def _execute(*, run, config: ExpertIterationRunConfig, reporter, compute, resume_from) -> dict:

    start = Policy.objects.get(pk=config.policy_id)
    reward_model = RewardModel.objects.get(pk=config.reward_model_id) if config.selection != "rubric" else None
    name = f"{config.policy_name}-run{run.pk}"
    reporter.log(
        f"Expert iteration from {start}: {config.rounds} rounds of {config.samples} samples on "
        f"{config.tasks_per_round} tasks, the favourite by {config.selection}"
        + (f" ({reward_model})" if reward_model else "")
        + (", each round on a world of its own" if config.fresh_worlds else "")
        + f", on {compute.name}."
    )
    out = run_dir(run) / "expert_iteration"
    result = expert_iteration_train(
        run=run,
        start=start,
        reward_model=reward_model,
        config=config.expert_iteration_config(),
        out_dir=out,
        name=name,
        callbacks=RLCallbacks(
            progress=lambda f, m="": reporter.progress(0.98 * f, m),
            metrics=reporter.metrics,
            log=reporter.log,
            should_stop=reporter.should_stop,
            checkpoint=reporter.checkpoint,
        ),
        resume_from=resume_from,
        environment=config.environment,
        dev_environment=config.dev_environment,
        dev_tasks=config.dev_tasks,
        fresh_worlds=config.fresh_worlds,
        anchor=config.anchor,
    )
    best, outputs = checkpoints_lineage_add(run=run, name=name, best=result.best and result.best["round"])
    if result.stop_reason == "cancelled":
        raise RunCancelled()
    run_add_artifact(run=run, name="checkpoints", path=out / "checkpoints")
    return {
        "stop_reason": result.stop_reason,
        "message": result.message,
        "rounds": result.rounds,
        "best_policy_id": best.pk if best else None,
        "best_round": result.best and result.best["round"],
        "best_dev_success": result.best and result.best["dev"]["success"],
        "best_dev_deploy_success": result.best and result.best["dev"].get("deploy_success"),
        "last_policy_id": outputs.last().pk if outputs.exists() else None,
        "evaluations": [
            {
                "round": e["round"],
                "dev_success": e["dev"]["success"],
                "dev_greedy_success": e["dev"].get("greedy_success"),
                "dev_deploy_success": e["dev"].get("deploy_success"),
                "kept": e["kept"],
                "tasks": e["tasks"],
                "world": e.get("world"),
            }
            for e in result.evaluations
        ],
        "config": asdict(config),
        "seconds": result.seconds,
    }


def register_distill_kind() -> None:
    register(
        RunKind(
            name="expert_iteration",
            label="Expert iteration",
            config_class=ExpertIterationRunConfig,
            execute=_execute,
            check=_check,
            start_check=_check,
            lineage=_lineage,
            resumable=True,
            description="Best-of-n distillation: sample several episodes per task, keep the favourite (by the reward "
            "model, the answer majority then the reward model, or the rubric as the ceiling), fine-tune on its "
            "sampled tokens mixed with demonstrations, each round on a fresh world; rounds judged on dev tasks "
            "become policies.",
            suggest={"reward_model_id": newest_reward_model},
            choices={
                "policy_id": policy_choices,
                "reward_model_id": _reward_model_choices,
                "environment": environment_choices,
                "selection": lambda: [("reward_model", "reward_model"), ("majority", "majority"), ("rubric", "rubric")],
            },
        )
    )
