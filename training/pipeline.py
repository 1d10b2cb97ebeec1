"""The whole loop, headless: behaviour-cloned policy, then `rounds` rounds of rollouts ->
comparisons -> simulated annotators -> dataset of all labels so far -> reward model -> RL
(PPO, RLOO or GRPO) -> evaluation on held-out tasks (best-of-n in round one) -> the audit.

Every training stage is a run of the run machinery (launched, then executed in this
process), so what the pipeline made shows on the run pages with its lineage, each round's
evaluation is an ordinary before/after dashboard with the loop's curves, and the loop goes
on from the dashboard's "next round". `python manage.py run_pipeline` drives it; the rounds
themselves are training/loop/rounds.py.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.utils import timezone

from annotate.models import Campaign, Policy
from annotate.preferences import MIN_TEST_PAIRS
from annotate.services.comparisons import SELF_PAIRING as STRATEGIES
from core.configs import config_from_input
from training.envs.base import FRESH_WORLD_SEED, demonstrator_problem
from training.envs.registry import get_environment
from training.envs.services import environment_get, environment_problems
from training.evaluation.metrics import measured
from training.loop.config import BASELINES, PipelineConfig, bc_settings
from training.loop.rounds import (
    Stage,
    annotator_profile,
    eval_environment,
    parse_baselines,
    parse_methods,
    pipeline_user,
    round_advance,
    round_first,
    round_next,
)
from training.models import LoopRound
from training.policy.bc_config import BCConfig, extra_worlds_problem
from training.policy.limits import limits_problems
from training.policy.model_io import same_tokenizer
from training.policy.services import DEFAULT_POLICY, policy_train_default
from training.rl.config import ALGORITHMS as RL_KINDS
from training.rl.config import RLConfig, deploy_temperature_problems
from training.run_kinds.common import policy_problems
from training.run_kinds.improve import episodes_per_iteration_problem
from webapp.errors import ArbiterError
from webapp.runs.kinds import get_kind


@dataclass
class PipelineResult:
    policy: Policy
    rounds: list  # LoopRound, in order
    evaluation: object  # the last round's
    seconds: dict[str, float]


def run_pipeline(config: PipelineConfig, *, stage: Stage, log: Callable[[str], None] = print) -> PipelineResult:
    """The starting policy, then `config.rounds` rounds; `stage(title)` gives the progress
    callback of the stage starting."""
    from django.conf import settings

    config, notes = pipeline_plan(config)
    problems = pipeline_problems(config)
    if problems:
        raise ArbiterError("Nothing was started: " + " ".join(problems))
    for note in notes:
        log(f"Plan: {note}")
    name = config.name or f"pipeline-{timezone.now():%Y%m%d-%H%M%S}"
    if (
        LoopRound.objects.filter(loop=name).exists()
        or Campaign.objects.filter(name__startswith=f"{name} round 1").exists()
    ):
        raise ArbiterError(f"A pipeline named {name!r} ran already; choose another --name.")
    user = pipeline_user()
    clock = time.monotonic()
    step = stage("behaviour-cloned policy")
    if config.policy_id:
        policy = Policy.objects.filter(pk=config.policy_id).first()
        if policy is None:
            raise ArbiterError(f"No policy with id {config.policy_id}.")
    else:
        own = DEFAULT_POLICY if config.environment == "encyclopedia" else f"{DEFAULT_POLICY}-{config.environment}"
        if config.bc_base_policy_id:
            own = f"{own}-into-{config.bc_base_policy_id}"
        if config.seed:  # each loop seed clones its own start (seed 0 is the default policy)
            own = f"{own}-seed{config.seed}"
        if config.bc:  # other settings clone another start, kept apart from the default one
            own = f"{own}-{hashlib.sha256(json.dumps(config.bc, sort_keys=True).encode()).hexdigest()[:8]}"
        cloning = rising(step)
        step(0.0, "playing the demonstrations ...")  # minutes before the first step: said as it begins
        policy = policy_train_default(
            config=config_from_input(BCConfig, bc_settings(config)),
            name=own,
            target=settings.VAR_DIR / "policies" / own,
            progress=lambda f: cloning(f, "behaviour cloning"),
            log=log,
        )
    step(1.0, f"{policy}")
    seconds = {"policy": round(time.monotonic() - clock, 1)}
    rounds = [round_first(loop=name, config=replace(config, name=name), policy=policy, user=user)]
    round_advance(rounds[0], stage=stage, user=user)
    for _ in range(config.rounds - 1):
        rounds.append(round_next(previous=rounds[-1], labels="simulated", user=user))
        round_advance(rounds[-1], stage=stage, user=user)
    for loop_round in rounds:
        seconds.update({f"round {loop_round.number} {k}": v for k, v in loop_round.seconds.items()})
    last = rounds[-1]
    return PipelineResult(policy=policy, rounds=rounds, evaluation=last.evaluation, seconds=seconds)


def rising(progress: Callable[[float, str], None]) -> Callable[[float, str], None]:
    """`progress` that never goes back: behaviour cloning that extends its steps while its policy
    still improves reports a lower fraction (99% then 91%), and a bar must hold instead."""
    high = 0.0

    def report(fraction: float, message: str = "") -> None:
        nonlocal high
        high = max(high, fraction)
        progress(high, message)

    return report


def before_after_rows(evaluation) -> list[dict]:
    """The before/after table: one row per system and mode, each metric as (mean, low, high)."""
    rows = []
    for entry in evaluation.entries.all():
        for mode in ("sampled", "greedy"):
            figures = entry.metrics.get(mode)
            if figures:
                rows.append(
                    {
                        "system": entry.label,
                        "mode": mode,
                        **{
                            metric: (value["mean"], value["low"], value["high"])
                            for metric, value in figures.items()
                            if value.get("mean") is not None
                        },
                    }
                )
    return rows


def format_table(rows: list[dict]) -> str:

    columns = [
        ("success", "success", True),
        ("f1", "F1", True),
        ("quote_support", "quotes", True),
        ("rm_score", "RM score", False),
        ("steps", "steps", False),
        ("tool_errors", "tool errors", False),
        ("kl", "KL", False),
    ]
    shown = measured([key for key, _, _ in columns], rows)  # the environment's columns only
    columns = [column for column in columns if column[0] in shown]
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
        lines.append(
            f"{row['system']:<{width}}{row['mode']:<9}"
            + "".join(f"{cell(row.get(key), percent):<22}" for key, _, percent in columns)
        )
    return "\n".join(lines)


def format_head_to_head(rows: list[dict]) -> str:
    """The evaluation's head-to-head rows as lines: which of two systems wins, by how much."""
    lines = []
    for row in rows:
        d = row["difference"]
        verdict = f"{row['winner']} wins" if row["winner"] else "neither clearly"
        lines.append(
            f"{row['mode']:<8} {row['a']['label']} [{row['a']['method']}] vs {row['b']['label']} [{row['b']['method']}]: "
            f"{100 * d['mean']:+.1f} points [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}], {verdict}"
        )
    return "\n".join(lines) or "(no two systems besides the start)"


# Comparisons a round aims at (all pairs of a task's episodes): a reward model needs 16 training
# and 4 test pairs that are not ties, and on a small environment many pairs are ties or identical.
PLANNED_PAIRS = 150
# Fewer training tasks than this: a small environment, whose plan says how its test split is sized.
SMALL_ENVIRONMENT = 100
MAX_PLANNED_SAMPLES = 6
# Demonstrations behaviour cloning aims at. With fewer the default policy memorises them: on a
# 30-task arithmetic environment, 621 demonstrations (20 other worlds) gave 100% on its training
# tasks, 0% on its eval tasks and the same episode every time; 1,881 (62 worlds) gave 83% greedy
# on eval (benchmarks/RESULTS.md, issue 29).
PLANNED_DEMONSTRATIONS = 2000


@dataclass
class EnvironmentSize:
    train: int
    dev: int
    eval: int


def environment_size(config: PipelineConfig) -> EnvironmentSize:

    env = environment_get(config.environment)
    evaluated = environment_get(eval_environment(config))
    return EnvironmentSize(train=len(env.tasks("train")), dev=len(env.tasks("dev")), eval=len(evaluated.tasks("eval")))


def pipeline_plan(config: PipelineConfig) -> tuple[PipelineConfig, list[str]]:
    """The configuration with its automatic settings chosen for the environment's size, and a
    line for each choice: episodes per task (enough pairs for a reward model), rollout tasks
    (at most all), RL episodes per iteration (at most one per training task, times the group
    for RLOO and GRPO). An environment that cannot be built is left to pipeline_problems."""
    try:
        size = environment_size(config)
    except Exception:  # noqa: BLE001 - pipeline_problems names why the environment cannot be used
        return config, []
    notes = []
    tasks = min(config.rollout_tasks, size.train)
    if tasks < config.rollout_tasks and config.rollout_tasks != PipelineConfig.rollout_tasks:
        notes.append(
            f"rollout_tasks: {config.rollout_tasks} asked, {config.environment} has {size.train} training "
            f"tasks: all {tasks} are rolled out."
        )
    samples = config.samples_per_task
    if samples == 0:
        samples = 2
        while tasks * samples * (samples - 1) // 2 < PLANNED_PAIRS and samples < MAX_PLANNED_SAMPLES:
            samples += 1
        notes.append(
            f"samples_per_task: {samples} episodes on each of {tasks} training tasks, up to "
            f"{tasks * samples * (samples - 1) // 2} comparisons (at least {PLANNED_PAIRS} are aimed at; "
            f"--samples-per-task to choose)."
        )
    if size.train < SMALL_ENVIRONMENT:
        notes.append(
            f"test split: {config.environment} has {size.train} training tasks, fewer than {SMALL_ENVIRONMENT}, and "
            "a small environment's episodes often tie; the reward model's test split is sized to the labels when "
            f"each round's dataset is built: a fifth of the tasks, up to half where a fifth holds fewer than "
            f"{MIN_TEST_PAIRS} pairs that are not ties."
        )
    bc_worlds = config.bc_extra_worlds
    if bc_worlds < 0 and config.policy_id and not config.baselines:
        bc_worlds = 0  # nothing is cloned
    elif bc_worlds < 0:
        bc_worlds, note = _bc_worlds(config, size)
        notes.append(note)
    if config.policy_id and config.baselines:
        notes.append(_given_start_note(replace(config, bc_extra_worlds=bc_worlds)))
    ppo = dict(config.ppo) if isinstance(config.ppo, dict) else config.ppo  # a bad one is pipeline_problems'
    if isinstance(ppo, dict) and "episodes_per_iteration" not in ppo and size.train:
        group = ppo.get("group_size", RLConfig.group_size) if config.rl_kind != "ppo" else 1
        group = group if isinstance(group, int) and group > 0 else 1  # a bad value is refused by the RL config
        episodes = min(RLConfig.episodes_per_iteration, size.train * group) // group * group
        if episodes < RLConfig.episodes_per_iteration:
            ppo["episodes_per_iteration"] = episodes
            minibatch = ppo.get("minibatch_size", RLConfig.minibatch_size)
            if isinstance(minibatch, int) and minibatch > episodes:
                ppo["minibatch_size"] = episodes
            notes.append(
                f"{config.rl_kind.upper()} episodes_per_iteration: {episodes} ({size.train} training tasks"
                + (f" x {group} samples each" if group > 1 else ", one episode each")
                + "; the default is "
                f"{RLConfig.episodes_per_iteration})."
            )
    return replace(config, rollout_tasks=tasks, samples_per_task=samples, ppo=ppo, bc_extra_worlds=bc_worlds), notes


def _given_start_note(config: PipelineConfig) -> str:
    """What the baselines are cloned with when the start was given, not cloned by the pipeline."""
    wanted, _ = parse_baselines(config.baselines)
    settings = bc_settings(config)
    return (
        f"baselines: the start is policy {config.policy_id}, given (--policy-id), not cloned here, so "
        f"{' and '.join(BASELINES[b][0] for b in wanted)} are behaviour-cloned with the pipeline's default behaviour "
        f"cloning settings and the loop's seed ({', '.join(f'{k} {v}' for k, v in settings.items())}), "
        f"which need not be how policy {config.policy_id} was made"
        + (
            ""
            if config.bc_base_policy_id
            else f"; each into a fresh model of the default architecture with policy {config.policy_id}'s tokenizer"
        )
        + "."
    )


def _bc_worlds(config: PipelineConfig, size: EnvironmentSize) -> tuple[int, str]:
    """Other worlds behaviour cloning imitates: 20 (the default), more when 20 give fewer than
    PLANNED_DEMONSTRATIONS, none when the environment cannot be built per seed."""
    from django.conf import settings

    try:
        world = get_environment(config.environment, configured=settings.ARBITER_ENVIRONMENTS, seed=1)
        per_world = sum(len(world.tasks(split)) for split in ("train", "dev", "eval"))
        world.close()
    except Exception:  # noqa: BLE001 - an environment that takes no seed refuses it in its own way
        return 0, (
            f"bc_extra_worlds: 0 ({config.environment} is not built per seed, so behaviour cloning imitates "
            f"its {size.train} training tasks only)."
        )
    default = BCConfig.extra_worlds
    worlds = min(FRESH_WORLD_SEED - 1, max(default, -(-(PLANNED_DEMONSTRATIONS - size.train) // max(1, per_world))))
    demos = size.train + worlds * per_world
    return worlds, (
        f"bc_extra_worlds: {worlds} other worlds of {per_world} tasks, {demos} demonstrations with "
        f"the {size.train} training tasks (about {PLANNED_DEMONSTRATIONS} are aimed at; fewer are "
        "memorised rather than learnt)"
        + (f"; {FRESH_WORLD_SEED - 1} is the most there are" if worlds == FRESH_WORLD_SEED - 1 else "")
        + "."
    )


def pipeline_problems(config: PipelineConfig) -> list[str]:
    """Everything the configuration needs, checked before the first stage starts (an hour of
    behaviour cloning must not end on a setting the third stage refuses)."""
    problems = environment_problems(config.environment)
    if config.eval_environment:
        problems += [f"eval_environment: {p}" for p in environment_problems(config.eval_environment)]
    size = None
    if not problems:
        try:
            size = environment_size(config)
        except Exception as exc:  # noqa: BLE001 - a user's environment may fail in any way
            problems.append(f"environment: {exc}")
        else:
            problems += _size_problems(config, size)
    if config.policy_id:
        problems += [f"policy_id: {p}" for p in policy_problems(config.policy_id)]
    if size is not None and (not config.policy_id or config.baselines):  # something is behaviour-cloned
        problem = demonstrator_problem(environment_get(config.environment))
        if problem and not config.policy_id:
            problems.append(f"environment: {problem} Give --policy-id (a registered policy, docs/policies.md).")
        elif problem:
            problems.append(f"baselines: behaviour cloning needs a demonstrator: {problem}")
        if config.bc_base_policy_id:
            problems += [f"bc_base_policy_id: {p}" for p in policy_problems(config.bc_base_policy_id)]
    if not 1 <= config.rounds <= 50:
        problems.append("rounds: 1 to 50.")
    if config.audit_size < 0 or config.audit_disagreements < 0:
        problems.append("audit_size and audit_disagreements: 0 or more.")
    if config.eval_seen_tasks < 0:
        problems.append("eval_seen_tasks: 0 (none) or more.")
    problems += limits_problems(config)
    try:
        annotator_profile(config).validate()
    except ValueError as exc:
        problems.append(f"annotators: {exc}.")

    if config.pairing not in STRATEGIES:
        problems.append(f"pairing: one of {', '.join(STRATEGIES)}.")
    try:  # the rollout run's own rules for the settings the rounds pass it
        config_from_input(
            get_kind("rollout").config_class,
            {"answer_branches": config.answer_branches, "answer_pairs_per_task": config.answer_pairs_per_task},
        )
    except ValueError as exc:
        problems.append(" ".join(str(exc).splitlines()))
    if config.bc_extra_worlds >= 0 and (not config.policy_id or config.baselines):
        problem = extra_worlds_problem(config.bc_extra_worlds)
        problems += [f"bc_{problem}"] if problem else []
    problems += _bc_problems(config) + _baseline_problems(config, problems)
    if config.samples_per_task and config.samples_per_task < 2:
        problems.append("samples_per_task: at least 2 (comparisons pair a task's episodes).")
    if config.annotators < 1:
        problems.append("annotators: at least 1.")
    if config.compare_dpo:
        problems += _compare_problems(config, size)
    methods, problem = parse_methods(config.methods)
    problems += [problem] if problem else []
    problems += _deploy_problems(config)
    if "expert_iteration" in methods:
        try:
            config_from_input(get_kind("expert_iteration").config_class, config.expert_iteration)
        except ValueError as exc:
            problems.append(f"expert_iteration settings: {' '.join(str(exc).splitlines())}")
    if config.rl_kind not in RL_KINDS:
        problems.append(f"rl_kind: one of {', '.join(RL_KINDS)}.")
        return problems
    try:  # the RL settings are known now; the ids they refer to are checked when each run launches
        rl = config_from_input(get_kind(config.rl_kind).config_class, config.ppo)
    except ValueError as exc:
        problems.append(f"{config.rl_kind.upper()} settings: {' '.join(str(exc).splitlines())}")
    else:
        problem = episodes_per_iteration_problem(rl.rl_config(), size.train) if size else None
        problems += [f"{config.rl_kind.upper()} settings: {problem}"] if problem else []
    return problems


# Behaviour cloning settings the loop sets itself (from its own flags, or per baseline), or that
# only a bc run launched by hand uses: refused in `bc`, so an override never hides a flag.
LOOP_BC_SETTINGS = {
    "environment": "--environment",
    "base_policy_id": "--bc-base-policy-id",
    "extra_worlds": "--bc-extra-worlds",
    "seed": "--seed",
    "policy_name": "the loop names its policies",
    "rollout_campaign_id": "the loop rolls out itself",
    "rollout_tasks": "the loop rolls out itself",
    "rollout_samples": "the loop rolls out itself",
}


def _bc_problems(config: PipelineConfig) -> list[str]:
    """The `bc` overrides: a JSON object of bc run settings that the loop does not set itself."""
    if not isinstance(config.bc, dict):
        return ["bc: a JSON object of behaviour cloning run settings."]
    problems = [
        f"bc: {key} is set by the loop ({LOOP_BC_SETTINGS[key]})." for key in config.bc if key in LOOP_BC_SETTINGS
    ]
    try:
        config_from_input(
            get_kind("bc").config_class, {k: v for k, v in config.bc.items() if k not in LOOP_BC_SETTINGS}
        )
    except ValueError as exc:
        problems.append(f"BC settings: {' '.join(str(exc).splitlines())}")
    return problems


def _baseline_problems(config: PipelineConfig, problems: list[str]) -> list[str]:
    """The baselines' names, and where they are cloned into a given base policy, a start that shares
    its tokenizer: the evaluation plays only policies that tokenize as the start does (it measures
    their KL to it). `problems`: the policy ids were refused already."""
    wanted, problem = parse_baselines(config.baselines)
    if problem or not wanted:
        return [problem] if problem else []
    if not (config.policy_id and config.bc_base_policy_id):
        return []  # the start is cloned into the same base, or the baselines take the start's own tokenizer
    if any(p.startswith(("policy_id", "bc_base_policy_id")) for p in problems):
        return []
    start, base = Policy.objects.get(pk=config.policy_id), Policy.objects.get(pk=config.bc_base_policy_id)
    if not same_tokenizer(start.model_dir, base.model_dir):
        return [
            f"baselines: the start ({start}) does not share the tokenizer of bc_base_policy_id {base}, which the "
            "baselines are cloned into, and the evaluation plays only policies that share the start's tokenizer."
        ]
    return []


def _deploy_problems(config: PipelineConfig) -> list[str]:
    """The deploy temperature, and method settings that would judge dev at another one: above 0
    the round compares the methods' sampled dev success, so their eval_temperature must be it."""
    problems = deploy_temperature_problems(config.deploy_temperature)
    if problems or not config.deploy_temperature:
        return problems
    for name, overrides in (("ppo", config.ppo), ("expert_iteration", config.expert_iteration)):
        given = overrides.get("eval_temperature") if isinstance(overrides, dict) else None
        if given is not None and given != config.deploy_temperature:
            problems.append(
                f"{name} eval_temperature: {given} while deploy_temperature is {config.deploy_temperature:g}; the "
                "round chooses between methods on dev success at the deploy temperature, so leave eval_temperature "
                "out (the loop sets it) or give the same value."
            )
    return problems


def _compare_problems(config: PipelineConfig, size) -> list[str]:
    """What --compare-dpo needs: a demonstrator to correct with, and SFT and DPO settings their runs take."""
    problems = []
    if not 1 <= config.corrections <= 100_000:
        problems.append("corrections: 1 to 100,000.")
    if size is not None:
        problem = demonstrator_problem(environment_get(config.environment))
        if problem:
            problems.append(f"compare_dpo: the simulated corrections follow the environment's demonstrator: {problem}")
    for kind, overrides in (("sft", config.sft), ("dpo", config.dpo)):
        if not isinstance(overrides, dict):
            problems.append(f"{kind}: a JSON object of {kind} run settings.")
            continue
        try:
            config_from_input(get_kind(kind).config_class, overrides)
        except ValueError as exc:
            problems.append(f"{kind.upper()} settings: {' '.join(str(exc).splitlines())}")
    return problems


def _size_problems(config: PipelineConfig, size: EnvironmentSize) -> list[str]:
    """What the environment's size cannot give the stages: pairs to label, eval tasks to evaluate on."""
    problems = []
    tasks = min(config.rollout_tasks, size.train)
    if tasks < 10:
        problems.append(
            f"rollout_tasks: {config.environment} gives {tasks} training tasks to roll out; the reward "
            f"model needs pairs from at least 10 (its test split is a fifth of the tasks)."
        )
    if size.eval < 1:
        problems.append(f"eval_environment: {eval_environment(config)} has no eval tasks to evaluate on.")
    return problems
