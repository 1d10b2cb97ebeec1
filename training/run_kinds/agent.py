"""Run kinds of the agent side: policy rollouts and behaviour cloning."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from django.urls import reverse

from annotate.models import Campaign, Policy
from annotate.services.comparisons import SELF_PAIRING as STRATEGIES
from core.config_ranges import out_of_range
from training.envs.base import demonstrator_problem
from training.envs.services import environment_get, environments_here, parse_task_ids
from training.policy.bc_config import BCConfig, demonstrator_choice_problems, extra_worlds_problem, lora_problems
from training.policy.limits import limits_problems, max_action_tokens_field, max_context_field
from training.policy.services import (
    PolicyTrainingStopped,
    policy_rollouts_launch,
    policy_rollouts_store,
    policy_run_dir,
    policy_train_default,
)
from training.run_kinds.common import (
    ENVIRONMENT_HELP,
    SPLITS,
    TASK_IDS_HELP,
    campaign_choices,
    environment_check,
    environment_choices,
    policy_choices,
    policy_link,
    policy_problems,
)
from webapp.errors import ArbiterError
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.services import RunCancelled, run_add_artifact, run_add_lineage

# --- Rollouts ---------------------------------------------------------------------------


@dataclass
class RolloutRunConfig:
    policy_id: int = field(default=0, metadata={"help": "the policy to run (it needs a model directory)"})
    environment: str = field(default="encyclopedia", metadata={"help": ENVIRONMENT_HELP})
    split: str = field(default="train", metadata={"help": "tasks of this split: train, dev or eval"})
    tasks: int = field(default=50, metadata={"help": "how many tasks of the split, in a fixed order"})
    task_ids: str = field(default="", metadata={"help": TASK_IDS_HELP})
    samples_per_task: int = field(default=2, metadata={"help": "episodes per task"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature; 0 is greedy"})
    campaign_id: int = field(
        default=0, metadata={"help": "build comparisons of the new trajectories in this campaign (0: none)"}
    )
    pairing: str = field(
        default="all_pairs",
        metadata={
            "help": "how the new trajectories of a task are paired: all_pairs, outcome_differs or same_calls_different_answer"
        },
    )
    answer_branches: int = field(
        default=0,
        metadata={
            "help": (
                "From every episode that answered after reading, this many more episodes that take the same path and "
                "sample the final answer afresh (docs/loop.md); 0: none."
            )
        },
    )
    answer_pairs_per_task: int = field(
        default=2,
        metadata={
            "help": (
                "With answer_branches and a campaign: up to this many more comparisons per task of episodes that made the "
                "same calls and answered differently, on top of the pairing's."
            )
        },
    )
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    max_action_tokens: int = max_action_tokens_field()
    max_context: int = max_context_field()

    def validate(self) -> list[str]:

        problems = [] if self.pairing in STRATEGIES else [f"pairing: one of {', '.join(STRATEGIES)}."]
        if self.split not in SPLITS:
            problems.append(f"split: one of {', '.join(SPLITS)}.")
        if self.tasks < 1:
            problems.append("tasks: at least 1.")
        if not 1 <= self.samples_per_task <= 64:
            problems.append("samples_per_task: between 1 and 64.")
        if self.temperature < 0:
            problems.append("temperature: 0 (greedy) or more.")
        if not 0 <= self.answer_branches <= 16 or not 0 <= self.answer_pairs_per_task <= 64:
            problems.append("answer_branches: 0 to 16; answer_pairs_per_task: 0 to 64.")
        problems += limits_problems(self)
        return problems


def _pairing_choices() -> list[tuple[str, str]]:

    return [(strategy, strategy.replace("_", " ")) for strategy in STRATEGIES]


def _rollout_check(config: RolloutRunConfig) -> list[str]:
    problems = policy_problems(config.policy_id) + environment_check(config.environment, config.split, config.task_ids)
    if config.campaign_id and not Campaign.objects.filter(pk=config.campaign_id).exists():
        problems.append(f"No campaign with id {config.campaign_id}.")
    return problems


def _rollout_lineage(config: RolloutRunConfig) -> list[dict]:
    links = [policy_link(config.policy_id)]
    if config.campaign_id:
        campaign = Campaign.objects.get(pk=config.campaign_id)
        links.append(
            lineage_link(
                "campaign",
                campaign.pk,
                campaign.name,
                reverse("annotate:quality", args=[campaign.pk]),
                direction="output",
            )
        )
    return links


def _rollout_execute(*, run, config: RolloutRunConfig, reporter, compute, resume_from) -> dict:

    def progress(fraction: float) -> None:
        reporter.progress(0.95 * fraction, f"{fraction:.0%} of the episodes")
        if reporter.should_stop():
            raise RunCancelled()

    policy = Policy.objects.get(pk=config.policy_id)
    campaign = Campaign.objects.filter(pk=config.campaign_id).first() if config.campaign_id else None

    reporter.log(
        f"Rolling out {policy} in {config.environment} on {config.tasks} {config.split} tasks x "
        f"{config.samples_per_task} at temperature {config.temperature}."
    )
    result = policy_rollouts_store(
        policy=policy,
        split=config.split,
        n_tasks=config.tasks,
        samples=config.samples_per_task,
        temperature=config.temperature,
        campaign=campaign,
        seed=config.seed,
        progress=progress,
        device=compute.device,
        environment=config.environment,
        task_ids=parse_task_ids(config.task_ids),
        max_action_tokens=config.max_action_tokens,
        max_context=config.max_context,
        pairing=config.pairing,
        answer_branches=config.answer_branches,
        answer_pairs_per_task=config.answer_pairs_per_task,
        run=run,
    )
    reporter.log(
        f"Stored {result['trajectories']} trajectories ({result['duplicates']} duplicates), "
        f"{result['comparisons']} comparisons; success {result['success']:.1%}."
    )
    if config.answer_branches:
        reporter.log(
            f"Answer branches: {result['branches']} new trajectories, {result['answer_pairs']} of the "
            f"comparisons made the same calls and answered differently"
            + (
                f"; {result['unreplayable']} episodes could not be replayed (the environment answered the "
                f"same calls differently), so they have no branches."
                if result["unreplayable"]
                else "."
            )
        )
    return result


# --- Behaviour cloning ------------------------------------------------------------------

BC_RANGES = {
    "demos_per_task": (1, 100),
    "vocab_size": (64, 65536),
    "hidden": (8, 4096),
    "layers": (1, 48),
    "heads": (1, 64),
    "batch_size": (1, 4096),
    "max_steps": (1, 1_000_000),
    "warmup_steps": (0, 1_000_000),
    "rollout_tasks": (1, 100_000),
    "rollout_samples": (1, 64),
    "threads": (0, 256),
    "learning_rate": (0, 1),
    "grad_clip": (0, 1000),
    "first_action_weight": (0, 100),
    "processes": (1, 64),
    "dev_every": (0, 1_000_000),
    "dev_tasks": (1, 10_000),
    "extend_steps": (0, 1_000_000),
    "extend_patience": (1, 100),
    "lora_rank": (0, 4096),
    "lora_alpha": (0, 1_000_000),
}


@dataclass
class BCRunConfig(BCConfig):
    policy_name: str = field(default="bc", metadata={"help": "Name of the new policy (saved under var/policies/)."})
    rollout_campaign_id: int = field(
        default=0,
        metadata={
            "help": (
                "When training succeeds, queue a rollout run of the new policy that pairs its episodes into comparisons "
                "of this campaign (0: none)."
            )
        },
    )
    rollout_tasks: int = field(default=30, metadata={"help": "Training tasks of that rollout run."})
    rollout_samples: int = field(default=2, metadata={"help": "Episodes per task in that rollout run."})

    def validate(self) -> list[str]:
        problems = out_of_range(self, BC_RANGES)
        if self.hidden % max(1, self.heads):
            problems.append("hidden: a multiple of heads.")
        if self.learning_rate <= 0:
            problems.append("learning_rate: must be positive.")
        if min(self.max_seconds, self.budget_seconds, self.observation_loss_weight, self.extra_worlds) < 0:
            problems.append("max_seconds, budget_seconds, observation_loss_weight and extra_worlds: 0 or more.")
        if extra_worlds_problem(self.extra_worlds):
            problems.append(extra_worlds_problem(self.extra_worlds))
        problems += demonstrator_choice_problems(self) + lora_problems(self)
        if self.processes > 1 and self.batch_size % self.processes:
            problems.append(
                f"batch_size: {self.batch_size} episodes cannot be shared evenly by {self.processes} processes; "
                "make it a multiple of processes."
            )
        if not self.policy_name.strip() or "/" in self.policy_name or self.policy_name.startswith("."):
            problems.append("policy_name: a plain name (letters, digits, dashes).")
        return problems


def _bc_check(config: BCRunConfig) -> list[str]:

    problems = environment_check(config.environment)
    if not problems and environments_here():  # the web process reads names only; the worker checks at start
        problem = demonstrator_problem(environment_get(config.environment))
        problems += [f"environment: {problem}"] if problem else []
    if config.base_policy_id:
        problems += [f"base_policy_id: {p}" for p in policy_problems(config.base_policy_id)]
    if config.rollout_campaign_id and not Campaign.objects.filter(pk=config.rollout_campaign_id).exists():
        problems.append(f"rollout_campaign_id: no campaign with id {config.rollout_campaign_id}.")
    return problems


def _bc_lineage(config: BCRunConfig) -> list[dict]:
    links = [policy_link(config.base_policy_id)] if config.base_policy_id else []
    if not config.rollout_campaign_id:
        return links
    campaign = Campaign.objects.get(pk=config.rollout_campaign_id)
    return links + [
        lineage_link(
            "campaign", campaign.pk, campaign.name, reverse("annotate:quality", args=[campaign.pk]), direction="output"
        )
    ]


def _bc_execute(*, run, config: BCRunConfig, reporter, compute, resume_from) -> dict:

    bc = BCConfig(**{f.name: getattr(config, f.name) for f in fields(BCConfig)})
    target = policy_run_dir(name=config.policy_name, run_id=run.pk)

    def phase(line: str) -> None:
        # Each line policy_train_default logs opens a phase (the tokenizer, cloning, the evaluation):
        # the page says it as it begins, not only the log.
        reporter.log(line)
        reporter.phase(line)

    reporter.phase(
        f"Loading policy {config.base_policy_id} and playing the demonstrations ..."
        if config.base_policy_id
        else "Playing the demonstrations in the environment ..."
    )
    try:
        policy = policy_train_default(
            config=bc,
            force=True,
            name=config.policy_name,
            target=target,
            run=run,
            progress=lambda f: reporter.progress(0.85 * f, "Behaviour cloning ..."),
            log=phase,
            metrics=reporter.metrics,
            should_stop=reporter.should_stop,
        )
    except PolicyTrainingStopped:
        raise RunCancelled() from None
    run_add_lineage(run=run, links=[policy_link(policy.pk, "output")])
    run_add_artifact(run=run, name="policy", path=target)
    summary = {"policy_id": policy.pk, "eval": policy.metadata.get("eval", {}), "bc": policy.metadata.get("bc", {})}
    campaign = Campaign.objects.filter(pk=config.rollout_campaign_id).first() if config.rollout_campaign_id else None
    if config.rollout_campaign_id and campaign is None:
        reporter.log(f"WARNING: campaign {config.rollout_campaign_id} is gone, so no rollouts were queued.")
    elif campaign is not None:
        try:
            follow_up = policy_rollouts_launch(
                policy=policy,
                campaign=campaign,
                tasks=config.rollout_tasks,
                samples=config.rollout_samples,
                user=run.created_by,
                idempotency_key=f"after-bc-run-{run.pk}",
                environment=config.environment,
            )
        except ArbiterError as exc:  # the policy is made all the same; the run says why nothing followed
            reporter.log(f"WARNING: the rollouts into {campaign.name} could not be queued: {exc.message}")
        else:
            reporter.log(
                f"Queued rollout run #{follow_up.pk}: {policy} on {config.rollout_tasks} tasks x "
                f"{config.rollout_samples}, paired into comparisons of {campaign.name}."
            )
            run_add_lineage(
                run=run,
                links=[
                    lineage_link(
                        "run",
                        follow_up.pk,
                        f"rollout run #{follow_up.pk}",
                        reverse("runs:detail", args=[follow_up.pk]),
                    )
                ],
            )
            summary["rollout_run_id"] = follow_up.pk
    return summary


def register_agent_kinds() -> None:
    register(
        RunKind(
            name="rollout",
            label="Rollouts",
            config_class=RolloutRunConfig,
            execute=_rollout_execute,
            description="Sample episodes from a policy in an environment and store them as trajectories "
            "(and comparisons in a campaign).",
            check=_rollout_check,
            start_check=_rollout_check,
            lineage=_rollout_lineage,
            work=lambda config: config.tasks * config.samples_per_task,
            work_words="episodes",
            choices={
                "policy_id": policy_choices,
                "campaign_id": campaign_choices,
                "environment": environment_choices,
                "split": lambda: [(s, s) for s in SPLITS],
                "pairing": _pairing_choices,
            },
        )
    )
    register(
        RunKind(
            name="bc",
            label="Behaviour cloning",
            config_class=BCRunConfig,
            execute=_bc_execute,
            check=_bc_check,
            start_check=_bc_check,
            lineage=_bc_lineage,
            work=lambda config: config.max_steps,
            work_words="optimizer steps",
            description="Train a policy on an environment's scripted demonstrations: from nothing (tokenizer, model, "
            "imitation) or into a registered chat model in its own format; optionally, once it succeeds, "
            "roll it out into a campaign for people to label.",
            choices={
                "environment": environment_choices,
                "rollout_campaign_id": campaign_choices,
                "base_policy_id": lambda: [(0, "(none: build the default architecture)")] + policy_choices(),
            },
        )
    )
