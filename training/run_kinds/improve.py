"""Run kinds that improve and measure a policy: PPO against a reward model, best-of-n, and
the before/after evaluation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from django.urls import reverse

from annotate.models import Policy
from core.callbacks import RLCallbacks
from rewardmodel.backbones import UNREADABLE_SHARE, BackboneError, unknown_token_share
from rewardmodel.models import RewardModel
from rewardmodel.serialize import episode_text_full
from training.envs.base import FRESH_WORLD_SEED, EpisodeRunner, demonstrator_problem
from training.envs.services import environment_get, environment_world, environments_here, parse_task_ids
from training.evaluation.episodes import best_of_n_kl
from training.evaluation.services import evaluation_execute
from training.policy.episodes import play_scripted
from training.policy.limits import limits_problems, max_action_tokens_field, max_context_field
from training.policy.model_io import same_tokenizer
from training.policy.parsers import HermesParser
from training.rl.config import RLConfig
from training.rl.services import dev_world, rl_train
from training.run_kinds.common import (
    ENVIRONMENT_HELP,
    SPLITS,
    TASK_IDS_HELP,
    checkpoints_lineage_add,
    environment_check,
    environment_choices,
    policy_choices,
    policy_link,
    policy_problems,
)
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.services import RunCancelled, run_add_artifact, run_add_lineage, run_dir

REWARDS = ("reward_model", "rubric", "utility")
RL_KINDS = ("ppo", "rloo", "grpo")


def _help(text: str) -> dict:
    return {"help": text}


def _limits(config) -> dict:
    return {"max_action_tokens": config.max_action_tokens, "max_context": config.max_context}


def _reward_model_choices():
    return [(0, "(none)")] + [(m.pk, str(m)) for m in RewardModel.objects.order_by("-created_at")[:200]]


def newest_reward_model() -> int | None:
    """The launch forms' starting reward model: the newest (None: there is none yet)."""
    return RewardModel.objects.order_by("-created_at").values_list("pk", flat=True).first()


def reward_model_missing(need: str) -> str:
    """Why a run needs `reward_model_id`, and where none exists yet, how to get one."""
    if RewardModel.objects.exists():
        return f"reward_model_id: {need}."
    return f"reward_model_id: {need}; there is none yet: train one with a Reward model run on a dataset snapshot."


def _reward_model_link(model: RewardModel) -> list[dict]:
    return [
        lineage_link(
            "dataset", model.snapshot_id, model.snapshot, reverse("annotate:dataset", args=[model.snapshot_id])
        ),
        lineage_link("reward model", model.pk, model, reverse("rewardmodel:detail", args=[model.pk])),
    ]


def _sample_texts(environment: str) -> list[str]:
    """Transcripts of a few episodes in the environment, as a reward model reads them: its
    scripted agent's where it has one, else the tasks' prompts."""
    env = environment_get(environment)
    tasks = env.tasks("train")[:4]

    if demonstrator_problem(env):
        return [task.prompt for task in tasks]
    turns = env.demonstrator(seed=0)
    runner = EpisodeRunner(env)
    parser = HermesParser(list(runner.tools.values()))
    return [episode_text_full(task.prompt, play_scripted(runner, task, turns, parser).steps) for task in tasks]


def reward_model_problems(reward_model_id: int, environment: str = "encyclopedia") -> list[str]:
    """Why the reward model cannot score the policy's episodes in the environment, if it cannot."""
    model = RewardModel.objects.filter(pk=reward_model_id).first()
    if model is None:
        return [f"No reward model with id {reward_model_id}."]
    if not (Path(model.model_dir) / "config.json").exists():
        return [f"Reward model {model} has no files at {model.model_dir}."]
    if not environments_here():
        return []  # its tokens are checked on the episodes by the worker when the run starts
    try:
        share = unknown_token_share(model.model_dir, _sample_texts(environment))
    except BackboneError as exc:
        return [f"Reward model {model}: {exc}"]
    if share > UNREADABLE_SHARE:
        return [
            f"Reward model {model}'s tokenizer cannot read the policy's trajectories: {share:.0%} of their "
            f"tokens are unknown to it."
        ]
    return []


def _same_tokenizer(a: Policy, b: Policy) -> bool:
    """Whether the two policies tokenize alike (training/policy/model_io.same_tokenizer)."""
    return same_tokenizer(a.model_dir, b.model_dir)


# --- PPO ----------------------------------------------------------------------------------


@dataclass
class RLRunConfig(RLConfig):
    policy_id: int = field(default=0, metadata=_help("The policy to start from (and, unless given, the KL reference)."))
    environment: str = field(default="encyclopedia", metadata=_help(ENVIRONMENT_HELP))
    reward: str = field(
        default="reward_model",
        metadata=_help(
            "What PPO maximises: 'reward_model' (the loop's learnt model), or the rubric itself as the upper bound: "
            "'rubric' (1 for a correct answer) or 'utility' (the rubric's utility)."
        ),
    )
    reward_model_id: int = field(default=0, metadata=_help("The reward model, when reward is 'reward_model'."))
    train_worlds: int = field(
        default=0,
        metadata=_help(
            "Also practise on every task of this many other worlds of the environment, built from seeds 62, 61, ... "
            "(worlds behaviour cloning does not imitate by default), so RL rewards reading names the policy cannot "
            "have memorised; the environment must take a seed (0: its training tasks only)."
        ),
    )
    fresh_worlds: bool = field(
        default=False,
        metadata=_help(
            "Every iteration's tasks from a newly generated world of the environment that no stage has seen "
            "(training/envs/worlds.py), instead of its training tasks and train_worlds, so memorising names cannot "
            "pay; the environment must take a seed."
        ),
    )
    dev_environment: str = field(
        default="",
        metadata=_help(
            "Whose dev tasks choose the checkpoints and guard against collapse (empty: the environment's fresh "
            "variant where it has one, a world behaviour cloning never imitated, else the environment itself)."
        ),
    )
    reference_policy_id: int = field(
        default=0,
        metadata=_help(
            "The frozen policy of the KL penalty (0: the starting policy; for a later round, the first round's start)."
        ),
    )
    policy_name: str = field(
        default="ppo", metadata=_help("Checkpoints are registered as policies named NAME-runID@iter-NNNN.")
    )

    def rl_config(self) -> RLConfig:
        names = {f.name for f in fields(RLConfig)}
        return RLConfig(**{k: v for k, v in asdict(self).items() if k in names})

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.reward not in REWARDS:
            problems.append(f"reward: one of {', '.join(REWARDS)}.")
        if not self.policy_name.strip() or "/" in self.policy_name or self.policy_name.startswith("."):
            problems.append("policy_name: a plain name (letters, digits, dashes).")
        kind = self.__dataclass_fields__["algorithm"].default  # each RL kind runs its own algorithm
        if self.algorithm != kind and not any(p.startswith("algorithm:") for p in problems):
            problems.append(f"algorithm: a {kind} run is {kind}; launch a {self.algorithm} run for that.")
        return problems


@dataclass
class _GroupRunConfig(RLRunConfig):
    learning_rate: float = field(
        default=1e-4,
        metadata=_help(
            "AdamW learning rate, PPO's: at 3e-4 both collapsed to one-search guesses against the loop's reward model "
            "(benchmarks/RESULTS.md, issue 16)."
        ),
    )


@dataclass
class RLOORunConfig(_GroupRunConfig):
    algorithm: str = field(
        default="rloo",
        metadata=_help("rloo: group_size samples per task, each against the mean of the others (no critic)."),
    )
    policy_name: str = field(default="rloo", metadata=_help("Checkpoints are policies named NAME-runID@iter-NNNN."))


@dataclass
class GRPORunConfig(_GroupRunConfig):
    algorithm: str = field(
        default="grpo",
        metadata=_help("grpo: group_size samples per task, each against the group's mean over its spread (no critic)."),
    )
    policy_name: str = field(default="grpo", metadata=_help("Checkpoints are policies named NAME-runID@iter-NNNN."))


def _rl_check(config: RLRunConfig) -> list[str]:

    problems = policy_problems(config.policy_id)
    environment = environment_check(config.environment)
    problems += environment
    if config.dev_environment:
        problems += [f"dev_environment: {p}" for p in environment_check(config.dev_environment, "dev")]
    if not 0 <= config.train_worlds <= FRESH_WORLD_SEED - 1:
        problems.append(f"train_worlds: 0 to {FRESH_WORLD_SEED - 1}.")
    elif config.train_worlds and config.fresh_worlds:
        problems.append("train_worlds: 0 with fresh_worlds (every iteration then plays a world of its own).")
    elif (config.train_worlds or config.fresh_worlds) and not environment and environments_here():
        try:
            environment_world(config.environment, FRESH_WORLD_SEED - 1)
        except Exception as exc:  # noqa: BLE001 - an environment that takes no seed fails in its own way
            field_name = "fresh_worlds" if config.fresh_worlds else "train_worlds"
            problems.append(f"{field_name}: {config.environment} cannot be built per seed ({exc}).")
    if config.reference_policy_id:
        problems += [f"reference_policy_id: {p}" for p in policy_problems(config.reference_policy_id)]
        if not problems and not _same_tokenizer(
            Policy.objects.get(pk=config.policy_id), Policy.objects.get(pk=config.reference_policy_id)
        ):
            problems.append("reference_policy_id: the reference policy must share the policy's tokenizer.")
    if config.reward == "reward_model":
        if not config.reward_model_id:
            problems.append(
                reward_model_missing(
                    "choose the reward model to train against (or reward 'rubric' for the upper bound)"
                )
            )
        elif not environment:
            problems += reward_model_problems(config.reward_model_id, config.environment)
    if environment or not environments_here():
        return problems  # the rest plays the environment: the worker checks it when the run starts
    if config.eval_every and not any(p.startswith("dev_environment:") for p in problems):
        dev, tasks = dev_world(config.environment, config.dev_environment, config.dev_tasks)
        if not tasks:
            problems.append(
                f"dev_environment: {dev.name} has no dev tasks to judge checkpoints on (or eval_every 0 "
                f"to train without dev evaluations)."
            )
    tasks = len(environment_get(config.environment).tasks("train"))
    problem = episodes_per_iteration_problem(config.rl_config(), tasks)
    if problem:
        problems.append(problem.replace("environment:", f"environment: {config.environment}", 1))
    return problems


def episodes_per_iteration_problem(ppo, tasks: int) -> str | None:
    """Why a batch of `episodes_per_iteration` cannot be drawn from `tasks` training tasks: PPO
    plays a different task per episode; RLOO and GRPO play `group_size` episodes of each task."""
    if not tasks:
        return "environment: has no training tasks."
    group = ppo.group_size if ppo.algorithm != "ppo" else 1
    if ppo.episodes_per_iteration // max(1, group) > tasks:
        each = f"{group} episodes of each task" if group > 1 else "each episode of a batch plays a different task"
        return (
            f"episodes_per_iteration: {ppo.episodes_per_iteration} needs {ppo.episodes_per_iteration // group} "
            f"training tasks ({each}), and there are {tasks}; at most {tasks * group}."
        )
    return None


def _rl_lineage(config: RLRunConfig) -> list[dict]:
    links = [policy_link(config.policy_id)]
    if config.reference_policy_id and config.reference_policy_id != config.policy_id:
        links.append({**policy_link(config.reference_policy_id), "type": "reference policy"})
    if config.reward == "reward_model":
        links += _reward_model_link(RewardModel.objects.select_related("snapshot").get(pk=config.reward_model_id))
    return links


def _rl_execute(*, run, config: RLRunConfig, reporter, compute, resume_from) -> dict:

    start = Policy.objects.get(pk=config.policy_id)
    reference = Policy.objects.get(pk=config.reference_policy_id or config.policy_id)
    reward_model = RewardModel.objects.filter(pk=config.reward_model_id).first() if config.reward_model_id else None
    name = f"{config.policy_name}-run{run.pk}"
    callbacks = RLCallbacks(
        progress=lambda f, m="": reporter.progress(0.98 * f, m),
        metrics=reporter.metrics,
        log=reporter.log,
        should_stop=reporter.should_stop,
        checkpoint=reporter.checkpoint,
    )
    reporter.log(
        f"{config.algorithm.upper()} from {start} against {config.reward if config.reward != 'reward_model' else reward_model}, "
        f"KL to {reference} (coefficient {config.kl_coef}), on {compute.name}."
    )
    out = run_dir(run) / "ppo"
    result = rl_train(
        run=run,
        start=start,
        reference=reference,
        reward_model=reward_model,
        reward=config.reward,
        config=config.rl_config(),
        out_dir=out,
        name=name,
        callbacks=callbacks,
        resume_from=resume_from,
        device=compute.device,
        environment=config.environment,
        dev_environment=config.dev_environment,
        train_worlds=config.train_worlds,
        fresh_worlds=config.fresh_worlds,
    )
    best, outputs = checkpoints_lineage_add(run=run, name=name, best=result.best and result.best["iteration"])
    if result.cancelled:
        raise RunCancelled()
    if result.diverged:
        raise ArbiterError(result.message)
    run_add_artifact(run=run, name="checkpoints", path=out / "checkpoints")
    return {
        "stop_reason": result.stop_reason,
        "message": result.message,
        "iterations": result.iterations,
        "best_policy_id": best.pk if best else None,
        "best_iteration": result.best and result.best["iteration"],
        "best_dev_success": result.best and result.best["dev"]["success"],
        "best_dev_deploy_success": result.best and result.best["dev"].get("deploy_success"),
        "best_dev_interval": result.best
        and [result.best["dev"].get("success_low"), result.best["dev"].get("success_high")],
        "last_policy_id": outputs.last().pk if outputs.exists() else None,
        "evaluations": [
            {
                "iteration": e["iteration"],
                "rm_score": e["rm_score"],
                "dev_success": e["dev"]["success"],
                "dev_greedy_success": e["dev"].get("greedy_success"),
                "dev_deploy_success": e["dev"].get("deploy_success"),
                "overoptimization": e.get("overoptimization", False),
                "collapse": e.get("collapse", False),
            }
            for e in result.evaluations
        ],
        "seconds": result.seconds,
    }


# --- Evaluation and best-of-n ---------------------------------------------------------------


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.replace(" ", "").split(",") if part]


def _temperatures(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def _temperatures_problem(text: str) -> list[str]:
    try:
        values = _temperatures(text)
    except ValueError:
        return ["baseline_temperatures: numbers separated by commas."]
    if any(not 0 < v <= 2 for v in values):
        return ["baseline_temperatures: each above 0 and at most 2."]
    return []


def _ids_problem(name: str, text: str) -> list[str]:
    try:
        values = _ids(text)
    except ValueError:
        return [f"{name}: whole numbers separated by commas."]
    return [f"{name}: each at least 1."] if any(v < 1 for v in values) else []


@dataclass
class EvaluationRunConfig:
    name: str = field(default="evaluation", metadata=_help("Name of the before/after page."))
    baseline_policy_id: int = field(
        default=0,
        metadata=_help("The starting policy: the 'before' side, and the reference every KL is measured against."),
    )
    policy_ids: str = field(
        default="", metadata=_help("Other policies to evaluate (PPO checkpoints, ...), as ids separated by commas.")
    )
    rl_run_id: int = field(
        default=0,
        metadata=_help(
            "Also evaluate this RL run's (PPO, RLOO or GRPO) checkpoint that was best on the dev rubric, and its last "
            "one (0: none)."
        ),
    )
    reward_model_id: int = field(
        default=0,
        metadata=_help("Scores every episode and picks best-of-n (0: no reward-model scores and no best-of-n)."),
    )
    best_of_n: str = field(
        default="4", metadata=_help("Best-of-n over the baseline at these n, separated by commas (empty for none).")
    )
    environment: str = field(default="encyclopedia", metadata=_help(ENVIRONMENT_HELP))
    split: str = field(default="eval", metadata=_help("Tasks of this split (eval is for final reports only)."))
    tasks: int = field(default=0, metadata=_help("How many tasks of the split, in a fixed order (0: all)."))
    task_ids: str = field(default="", metadata=_help(TASK_IDS_HELP))
    samples: int = field(default=2, metadata=_help("Sampled episodes per task and system."))
    temperature: float = field(default=1.0, metadata=_help("Sampling temperature."))
    greedy: bool = field(default=True, metadata=_help("Also one greedy episode per task and policy."))
    baseline_temperatures: str = field(
        default="0.3,0.5,0.7",
        metadata=_help(
            "The starting policy is also played at whichever of these temperatures (and `temperature`, and greedy) "
            "does best on 300 dev tasks of the environment's fresh world, a row of its own: the honest baseline for a "
            "method that only sharpens the policy (comma-separated; empty: none)."
        ),
    )
    seen_environment: str = field(
        default="",
        metadata=_help(
            "Also play every policy on the held-out (eval) tasks of a world it trained on, beside the evaluation's "
            "own: a gain that shows there and not on the unseen world is memorisation (empty: none)."
        ),
    )
    seen_tasks: int = field(
        default=0, metadata=_help("How many eval tasks of seen_environment, in a fixed order (0: as many as tasks).")
    )
    seed: int = field(default=0, metadata=_help("Sampling seed (the same for every system)."))
    max_action_tokens: int = max_action_tokens_field()
    max_context: int = max_context_field()

    def validate(self) -> list[str]:
        problems = _ids_problem("policy_ids", self.policy_ids) + _ids_problem("best_of_n", self.best_of_n)
        if self.seen_tasks < 0:
            problems.append("seen_tasks: 0 (as many as tasks) or more.")
        problems += _temperatures_problem(self.baseline_temperatures)
        if self.split not in SPLITS:
            problems.append(f"split: one of {', '.join(SPLITS)}.")
        if self.tasks < 0:
            problems.append("tasks: 0 (all) or more.")
        if not 1 <= self.samples <= 64:
            problems.append("samples: between 1 and 64.")
        if not self.temperature > 0:
            problems.append("temperature: above 0 (greedy episodes are the greedy switch).")
        if not problems and max(_ids(self.best_of_n) or [1]) * self.samples > 256:
            problems.append("best_of_n x samples: at most 256 episodes per task.")
        if not self.name.strip():
            problems.append("name: give the evaluation a name.")
        return problems + limits_problems(self)


def _rl_run_policies(run_id: int) -> list[tuple[str, Policy]]:
    """(label, policy) of an RL run's (PPO, RLOO, GRPO) best checkpoint by dev rubric and its last one."""

    kind = (Run.objects.filter(pk=run_id).values_list("kind", flat=True).first() or "ppo").upper()
    checkpoints = list(Policy.objects.filter(run_id=run_id, metadata__ppo__isnull=False).order_by("version"))
    chosen = []
    best = next((p for p in checkpoints if p.metadata["ppo"].get("best")), None)
    if best is not None:
        chosen.append((f"{kind} best by dev ({best})", best))
    if checkpoints and checkpoints[-1] != best:
        chosen.append((f"{kind} last ({checkpoints[-1]})", checkpoints[-1]))
    return chosen


def _evaluation_check(config: EvaluationRunConfig) -> list[str]:

    problems = [f"baseline_policy_id: {p}" for p in policy_problems(config.baseline_policy_id)]
    environment = environment_check(config.environment, config.split, config.task_ids)
    problems += environment
    if config.seen_environment:
        problems += [f"seen_environment: {p}" for p in environment_check(config.seen_environment, "eval")]
    if not config.validate():
        for policy_id in _ids(config.policy_ids):
            problems += [f"policy_ids: {p}" for p in policy_problems(policy_id)]
        if not problems:
            baseline = Policy.objects.get(pk=config.baseline_policy_id)
            for policy_id in _ids(config.policy_ids):
                if not _same_tokenizer(baseline, Policy.objects.get(pk=policy_id)):
                    problems.append(f"policy_ids: policy {policy_id} does not share the baseline's tokenizer.")
    if config.rl_run_id:
        run = Run.objects.filter(pk=config.rl_run_id, kind__in=RL_KINDS).first()
        if run is None:
            problems.append(f"rl_run_id: no RL run (ppo, rloo or grpo) with id {config.rl_run_id}.")
        elif not _rl_run_policies(run.pk):
            problems.append(f"rl_run_id: {run.kind} run #{run.pk} has saved no checkpoint yet.")
    if config.reward_model_id:
        if not environment:
            problems += reward_model_problems(config.reward_model_id, config.environment)
    elif not _ids_problem("best_of_n", config.best_of_n) and _ids(config.best_of_n):
        problems.append(reward_model_missing("best-of-n needs a reward model to choose with"))
    return problems


def _evaluation_lineage(config: EvaluationRunConfig) -> list[dict]:
    links = [{**policy_link(config.baseline_policy_id), "type": "baseline policy"}]
    links += [policy_link(i) for i in _ids(config.policy_ids)]
    if config.rl_run_id:
        kind = Run.objects.filter(pk=config.rl_run_id).values_list("kind", flat=True).first() or "rl"
        links.append(
            lineage_link(
                "RL run",
                config.rl_run_id,
                f"{kind} run #{config.rl_run_id}",
                reverse("runs:detail", args=[config.rl_run_id]),
            )
        )
    if config.reward_model_id:
        links += _reward_model_link(RewardModel.objects.select_related("snapshot").get(pk=config.reward_model_id))
    return links


def _evaluate(
    *,
    run,
    reporter,
    compute,
    name: str,
    baseline_id: int,
    others: list[tuple[str, Policy]],
    reward_model_id: int,
    best_of_n: list[int],
    split: str,
    tasks: int,
    samples: int,
    temperature: float,
    greedy: bool,
    seed: int,
    environment: str,
    task_ids: str,
    limits: dict,
    temperatures: list[float] = (),
    seen_environment: str = "",
    seen_tasks: int = 0,
) -> dict:

    def progress(fraction: float, message: str) -> None:
        reporter.progress(fraction, message)
        if reporter.should_stop():
            raise RunCancelled()

    evaluation = evaluation_execute(
        name=name,
        baseline=Policy.objects.get(pk=baseline_id),
        others=others,
        reward_model=RewardModel.objects.filter(pk=reward_model_id).first() if reward_model_id else None,
        best_of_n=best_of_n,
        split=split,
        n_tasks=tasks,
        samples=samples,
        temperature=temperature,
        greedy=greedy,
        seed=seed,
        device=compute.device,
        run=run,
        created_by=run.created_by,
        progress=progress,
        log=reporter.log,
        environment=environment,
        task_ids=parse_task_ids(task_ids),
        limits=limits,
        temperatures=temperatures,
        seen_environment=seen_environment,
        seen_tasks=seen_tasks,
    )
    run_add_lineage(
        run=run,
        links=[
            lineage_link(
                "evaluation",
                evaluation.pk,
                evaluation,
                reverse("training:evaluation", args=[evaluation.pk]),
            )
        ],
    )
    table = {
        entry.label: {mode: {k: v["mean"] for k, v in figures.items()} for mode, figures in entry.metrics.items()}
        for entry in evaluation.entries.all()
    }
    return {"evaluation_id": evaluation.pk, "table": table}


def _evaluation_execute(*, run, config: EvaluationRunConfig, reporter, compute, resume_from) -> dict:
    others = [(f"{Policy.objects.get(pk=i)}", Policy.objects.get(pk=i)) for i in _ids(config.policy_ids)]
    if config.rl_run_id:
        others += [pair for pair in _rl_run_policies(config.rl_run_id) if pair[1].pk not in {p.pk for _, p in others}]
    return _evaluate(
        run=run,
        reporter=reporter,
        compute=compute,
        name=config.name,
        baseline_id=config.baseline_policy_id,
        others=others,
        reward_model_id=config.reward_model_id,
        best_of_n=_ids(config.best_of_n),
        split=config.split,
        tasks=config.tasks,
        samples=config.samples,
        temperature=config.temperature,
        greedy=config.greedy,
        seed=config.seed,
        environment=config.environment,
        task_ids=config.task_ids,
        limits=_limits(config),
        temperatures=_temperatures(config.baseline_temperatures),
        seen_environment=config.seen_environment,
        seen_tasks=config.seen_tasks,
    )


@dataclass
class BestOfNRunConfig:
    policy_id: int = field(default=0, metadata=_help("The policy to sample from."))
    reward_model_id: int = field(default=0, metadata=_help("The reward model that picks the best sample."))
    n: int = field(default=4, metadata=_help("Samples per task; the highest-scored one is kept."))
    environment: str = field(default="encyclopedia", metadata=_help(ENVIRONMENT_HELP))
    split: str = field(default="eval", metadata=_help("Tasks of this split."))
    tasks: int = field(default=0, metadata=_help("How many tasks of the split, in a fixed order (0: all)."))
    task_ids: str = field(default="", metadata=_help(TASK_IDS_HELP))
    samples: int = field(default=1, metadata=_help("Best-of-n draws per task (each from n fresh samples)."))
    temperature: float = field(default=1.0, metadata=_help("Sampling temperature."))
    seed: int = field(default=0, metadata=_help("Sampling seed."))
    max_action_tokens: int = max_action_tokens_field()
    max_context: int = max_context_field()

    def validate(self) -> list[str]:
        problems = []
        if not 2 <= self.n <= 256:
            problems.append("n: between 2 and 256.")
        if self.split not in SPLITS:
            problems.append(f"split: one of {', '.join(SPLITS)}.")
        if self.tasks < 0:
            problems.append("tasks: 0 (all) or more.")
        if not 1 <= self.samples <= 16:
            problems.append("samples: between 1 and 16.")
        if not self.temperature > 0:
            problems.append("temperature: above 0 (n greedy samples would all be the same).")
        return problems + limits_problems(self)


def _best_of_n_check(config: BestOfNRunConfig) -> list[str]:
    environment = environment_check(config.environment, config.split, config.task_ids)
    return (
        policy_problems(config.policy_id)
        + environment
        + (
            reward_model_problems(config.reward_model_id, config.environment)
            if config.reward_model_id and not environment
            else []
            if config.reward_model_id
            else [reward_model_missing("choose the reward model that picks the best of n")]
        )
    )


def _best_of_n_lineage(config: BestOfNRunConfig) -> list[dict]:
    return [policy_link(config.policy_id)] + _reward_model_link(
        RewardModel.objects.select_related("snapshot").get(pk=config.reward_model_id)
    )


def _best_of_n_execute(*, run, config: BestOfNRunConfig, reporter, compute, resume_from) -> dict:

    summary = _evaluate(
        run=run,
        reporter=reporter,
        compute=compute,
        name=f"best-of-{config.n} run #{run.pk}",
        baseline_id=config.policy_id,
        others=[],
        reward_model_id=config.reward_model_id,
        best_of_n=[config.n],
        split=config.split,
        tasks=config.tasks,
        samples=config.samples,
        temperature=config.temperature,
        greedy=False,
        seed=config.seed,
        environment=config.environment,
        task_ids=config.task_ids,
        limits=_limits(config),
    )
    summary["kl_to_policy"] = best_of_n_kl(config.n)
    reporter.log(f"Best-of-{config.n}: KL to the policy log n - (n-1)/n = {summary['kl_to_policy']:.3f} nats.")
    return summary


def _rl_work(config: RLRunConfig) -> float:
    """The episodes an RL run plays in training, what its time grows with (the launch form's estimate)."""
    return config.iterations * config.episodes_per_iteration


def register_improve_kinds() -> None:
    register(
        RunKind(
            name="ppo",
            label="PPO",
            config_class=RLRunConfig,
            execute=_rl_execute,
            check=_rl_check,
            start_check=_rl_check,
            lineage=_rl_lineage,
            resumable=True,
            suggest={"reward_model_id": newest_reward_model},
            work=_rl_work,
            work_words="training episodes",
            description="Fine-tune a policy with multi-turn PPO against a reward model (or the rubric, as the upper "
            "bound), with a KL penalty to the starting policy; dev-rubric checkpoints become policies.",
            choices={
                "policy_id": policy_choices,
                "reference_policy_id": lambda: [(0, "(the starting policy)")] + policy_choices(),
                "reward_model_id": _reward_model_choices,
                "reward": lambda: [(r, r) for r in REWARDS],
                "environment": environment_choices,
                "algorithm": lambda: [("ppo", "ppo")],
            },
        )
    )
    for name, label, config_class, how in (
        ("rloo", "RLOO", RLOORunConfig, "each sample against the mean of its task's other samples"),
        ("grpo", "GRPO", GRPORunConfig, "each sample against its task's group mean over the group's spread"),
    ):
        register(
            RunKind(
                name=name,
                label=label,
                config_class=config_class,
                execute=_rl_execute,
                check=_rl_check,
                start_check=_rl_check,
                lineage=_rl_lineage,
                resumable=True,
                suggest={"reward_model_id": newest_reward_model},
                work=_rl_work,
                work_words="training episodes",
                description=f"Fine-tune a policy with {label} against a reward model (or the rubric): group_size samples "
                f"per task, {how}, no critic; the same KL penalty, guards and checkpoints as PPO.",
                choices={
                    "policy_id": policy_choices,
                    "reference_policy_id": lambda: [(0, "(the starting policy)")] + policy_choices(),
                    "reward_model_id": _reward_model_choices,
                    "reward": lambda: [(r, r) for r in REWARDS],
                    "environment": environment_choices,
                    "algorithm": lambda name=name: [(name, name)],
                },
            )
        )
    register(
        RunKind(
            name="best_of_n",
            label="Best-of-n",
            config_class=BestOfNRunConfig,
            execute=_best_of_n_execute,
            check=_best_of_n_check,
            start_check=_best_of_n_check,
            lineage=_best_of_n_lineage,
            suggest={"reward_model_id": newest_reward_model},
            description="Sample n episodes per task and keep the one the reward model scores highest; reports its "
            "rubric figures against the plain policy's, and its KL, log n - (n-1)/n.",
            choices={
                "policy_id": policy_choices,
                "reward_model_id": _reward_model_choices,
                "split": lambda: [(s, s) for s in SPLITS],
                "environment": environment_choices,
            },
        )
    )
    register(
        RunKind(
            name="evaluation",
            label="Evaluation (before/after)",
            config_class=EvaluationRunConfig,
            execute=_evaluation_execute,
            check=_evaluation_check,
            start_check=_evaluation_check,
            lineage=_evaluation_lineage,
            # Best-of-n needs a reward model: with none yet the form starts with none, so its defaults launch.
            suggest={
                "reward_model_id": newest_reward_model,
                "best_of_n": lambda: None if newest_reward_model() else "",
            },
            description="Play the starting policy, best-of-n and tuned policies on held-out tasks: rubric success, F1, "
            "quote support, reward-model score, steps, tool errors and KL, each with a 95% interval.",
            choices={
                "baseline_policy_id": policy_choices,
                "reward_model_id": _reward_model_choices,
                "split": lambda: [(s, s) for s in SPLITS],
                "environment": environment_choices,
            },
        )
    )
