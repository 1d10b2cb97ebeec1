"""Django glue for the policy: build the default policy once (in the foreground, or as a
behaviour-cloning run whose success queues its rollouts), store rollouts as trajectories."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotate.models import Campaign, Policy, Trajectory
from annotate.services.comparisons import comparisons_build
from annotate.services.imports import trajectories_import_objects
from training.envs.base import EpisodeRunner
from training.envs.registry import UnknownEnvironment, get_environment
from training.envs.services import environment_get, environment_tasks
from training.policy.bc_config import BCConfig, steps_for_data
from training.policy.chat import ChatFormat, ChatTemplateError, tool_parser_of
from training.policy.checkpoints import carry_policy_file
from training.policy.gguf import GgufError, gguf_convert, gguf_source, is_gguf_source
from training.policy.layout import TOOL_PARSER
from training.policy.limits import MAX_ACTION_TOKENS, MAX_CONTEXT
from training.policy.lora import merged, with_lora_if_asked
from training.policy.model_io import PolicyLoadError, build_model, load_policy, save_policy, train_tokenizer
from training.policy.success_rates import success_rates
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.services import run_launch

DEFAULT_POLICY = "default-bc"
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


class PolicyTrainingStopped(Exception):
    """Behaviour cloning was stopped (cancelled) before it finished; nothing was saved."""


def default_policy_dir() -> Path:
    return Path(settings.VAR_DIR) / "policies" / DEFAULT_POLICY


def policy_run_dir(*, name: str, run_id: int) -> Path:
    """Where a behaviour-cloning run saves its policy: the default policy's own folder the
    first time it is made (where `train_policy`, `run_pipeline` and the docs find it), else a
    folder of that run's own, so no run overwrites another's model."""
    if name == DEFAULT_POLICY and not (default_policy_dir() / "config.json").exists():
        return default_policy_dir()
    return Path(settings.VAR_DIR) / "policies" / f"{name}-run{run_id}"


def policy_with_model(name: str) -> Policy | None:
    """The newest policy called `name` whose model directory is on disk."""
    for policy in Policy.objects.filter(name=name).exclude(model_dir="").order_by("-created_at")[:5]:
        if (Path(policy.model_dir) / "config.json").exists():
            return policy
    return None


def policy_train_default(
    *,
    config=None,
    force: bool = False,
    progress=None,
    log=print,
    metrics=None,
    should_stop=None,
    name: str = DEFAULT_POLICY,
    target: Path | None = None,
    run=None,
) -> Policy:
    """Train a policy by behaviour cloning into `target` (the default policy unless given).

    The default policy is trained once and reused unless `force`. `should_stop()` ends
    training early (a cancelled run); the caller decides what a stopped run means.
    """
    import torch

    # Lazy: training.policy.bc loads torch, which the web process (it imports this module) never does.
    from training.policy.bc import NoDemonstrator, demonstrations, play_demonstrations, train_bc

    target = target or default_policy_dir()
    existing = Policy.objects.filter(name=name, model_dir=str(target)).order_by("-created_at").first()
    if existing and (target / "config.json").exists() and not force:
        return existing
    torch.set_num_threads(max(1, torch.get_num_threads()))
    config = config or BCConfig()
    base, model, tokenizer, chat = _base_policy(config.base_policy_id)
    parser = chat.parser_name if base else TOOL_PARSER

    def make_env(seed: int):
        return get_environment(config.environment, seed=seed, configured=settings.ARBITER_ENVIRONMENTS)

    try:
        env = environment_get(config.environment)
        played = play_demonstrations(env, config, parser=parser, make_env=make_env)
    except (UnknownEnvironment, NoDemonstrator) as exc:
        raise ArbiterError(str(exc)) from None
    started = time.monotonic()
    if base is None:
        log(f"Training the tokenizer on {len(played)} demonstrations in {env.name} ...")
        model, tokenizer, chat = _new_policy(config, played)
    else:
        log(
            f"Cloning {len(played)} demonstrations in {env.name} into {base} ({type(model).__name__}, its own "
            f"chat template, tool-call parser {parser}) ..."
        )
        model = with_lora_if_asked(model, config.lora_rank, config.lora_alpha, log)
    examples = demonstrations(chat, played)
    config, scaled = steps_for_data(config, len(examples))
    if scaled:
        log(f"Steps scaled to the data: {scaled}")
    log(
        f"Behaviour cloning a {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M-parameter policy on "
        f"{len(examples)} demonstrations ..."
    )
    longest_turn = max((_longest_run(mask) for _, mask in examples), default=0)
    # Evaluation turns may be as long as the longest demonstrated turn, with room to spare (a chat
    # model's JSON calls are longer than the default policy's 48 tokens).
    max_action_tokens = max(MAX_ACTION_TOKENS, 2 * longest_turn)
    judge, judged_on = _checkpoint_judge(env, config, tokenizer, chat, make_env, max_action_tokens, log)
    result = train_bc(
        model, tokenizer, examples, config, progress=progress, metrics=metrics, should_stop=should_stop, judge=judge
    )
    if "kept_step" in result:
        log(
            f"Kept the checkpoint of step {result['kept_step']} ({100 * result['kept_dev_greedy']:.1f}% greedy on "
            f"{judged_on}; the curve: " + ", ".join(f"{s}: {100 * v:.0f}%" for s, v in result["dev_curve"]) + ")."
        )
        result["dev_judged_on"] = judged_on
    if should_stop and should_stop():
        raise PolicyTrainingStopped(f"stopped after {result['steps']} steps")
    model = merged(model)
    over_budget = _warn_of_time(config, result, log)
    evaluation = env.tasks("eval")
    log(f"Evaluating on {len(evaluation)} eval tasks (greedy and temperature 1) ...")
    figures = success_rates(
        model, tokenizer, EpisodeRunner(env), evaluation, chat=chat, max_action_tokens=max_action_tokens
    )
    save_policy(model, tokenizer, target)
    report = {
        "bc": {k: v for k, v in result.items() if k != "config"},
        "eval": figures,
        "environment": env.name,
        "over_budget": over_budget,
        **({"base_policy": {"id": base.pk, "label": str(base)}} if base else {}),
        "tool_parser": parser,
        "config": asdict(config),
        "total_seconds": round(time.monotonic() - started, 1),
    }
    (target / "arbiter_policy.json").write_text(json.dumps(report, indent=2, default=str))
    defaults = {"model_dir": str(target), "metadata": report, "run": run, "parent": base}
    return Policy.objects.update_or_create(name=name, version=time.strftime("%Y%m%d-%H%M%S"), defaults=defaults)[0]


def _new_policy(config, played):
    """(model, tokenizer, chat format) of the default architecture, built from nothing: a
    tokenizer trained on the demonstrations' text."""
    # Lazy: training.policy.bc loads torch, which the web process (it imports this module) never does.
    from training.policy.bc import demonstration_texts

    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    chat = ChatFormat.for_policy(tokenizer, parser=TOOL_PARSER)
    model = build_model(tokenizer, hidden=config.hidden, layers=config.layers, heads=config.heads, seed=config.seed)
    return model, tokenizer, chat


def _checkpoint_judge(env, config, tokenizer, chat, make_env, max_action_tokens, log):
    """(judge, what it judges on) of behaviour cloning's checkpoint choice; (None, "") when
    there is none (`dev_every` 0, or several processes)."""
    # Lazy: training.policy.bc loads torch, which the web process (it imports this module) never does.
    from training.policy.bc import dev_judge

    if config.dev_every and config.processes == 1:
        judge, judged_on = dev_judge(
            env, config, tokenizer, chat, make_env=make_env, max_action_tokens=max_action_tokens
        )
        log(f"Every {config.dev_every} steps the checkpoint is judged greedy on {judged_on}; the best is kept.")
        return judge, judged_on
    if config.dev_every:
        log("With processes > 1 the last checkpoint is kept (no dev choice across processes).")
    return None, ""


def _base_policy(policy_id: int):
    """(policy, model, tokenizer, chat format) of the registered policy behaviour cloning
    clones into; four Nones for 0 (the default architecture, built from nothing)."""
    if not policy_id:
        return None, None, None, None
    base = Policy.objects.filter(pk=policy_id).exclude(model_dir="").first()
    if base is None:
        raise ArbiterError(f"base_policy_id: no policy with id {policy_id} and a model directory.")
    try:
        model, tokenizer = load_policy(base.model_dir)
        return base, model, tokenizer, ChatFormat.for_policy(tokenizer, base.model_dir)
    except (PolicyLoadError, ChatTemplateError) as exc:
        raise ArbiterError(f"base_policy_id: {base} cannot be cloned into: {exc}") from None


def _warn_of_time(config, result: dict, log) -> bool:
    """Say loudly when training ran over its time budget, or was cut by `max_seconds`;
    returns whether it ran over the budget."""
    over_budget = bool(config.budget_seconds and result["seconds"] > config.budget_seconds)
    if over_budget:
        log(
            f"WARNING: behaviour cloning took {result['seconds']:.0f} s, over its budget of "
            f"{config.budget_seconds:.0f} s: this machine is slower or busier than the defaults assume. The policy "
            f"is complete ({result['steps']} steps), not cut short."
        )
    elif config.max_seconds and result["steps"] < config.max_steps:
        log(
            f"WARNING: behaviour cloning stopped at max_seconds after {result['steps']} of {config.max_steps} steps; "
            f"the policy is weaker than a full run."
        )
    return over_budget


def _longest_run(mask: list[int]) -> int:
    """The longest stretch of agent tokens (one turn) in an action mask."""
    longest = current = 0
    for agent in mask:
        current = current + 1 if agent else 0
        longest = max(longest, current)
    return longest


def policy_rollouts_launch(
    *, policy: Policy, campaign: Campaign, tasks: int, samples: int, user, idempotency_key: str, environment: str = ""
) -> Run:
    """Queue a rollout run of `policy` on `tasks` training tasks x `samples` episodes of
    `environment` (the one it was trained in: its metadata's, else the default), paired into
    comparisons of `campaign`: what a behaviour-cloning run with `rollout_campaign_id` launches
    when it succeeds. A launch repeated with the same key queues nothing new."""
    return run_launch(
        kind="rollout",
        user=user,
        name=f"Rollouts of {policy} into {campaign.name}",
        idempotency_key=idempotency_key,
        config={
            "policy_id": policy.pk,
            "split": "train",
            "tasks": tasks,
            "samples_per_task": samples,
            "temperature": 1.0,
            "campaign_id": campaign.pk,
            **(
                {"environment": environment or (policy.metadata or {}).get("environment")}
                if environment or (policy.metadata or {}).get("environment")
                else {}
            ),
        },
    )


@transaction.atomic
def policy_by_run_ensure(
    *, name: str, user, campaign: Campaign | None = None, tasks: int = 30, samples: int = 2
) -> tuple[Policy | None, Run | None]:
    """The policy `name`, made by a behaviour-cloning run on a worker when it does not exist,
    and with `campaign`, that policy's rollouts paired into it by a rollout run. Called on
    every start (`load_demo`): it launches nothing that is queued, running or done already.

    Returns (the policy, or None while it is being made; the run at work, or None when done):
    - no policy, and a BC run making it is queued or running: (None, that run);
    - no policy otherwise (never launched; the last run failed or was cancelled): (None, a new
      BC run, whose success queues the rollouts: `policy_rollouts_launch`);
    - the policy, and `campaign` has comparisons or a rollout run into it is queued, running or
      succeeded: (policy, that run if active);
    - the policy, and nothing fills `campaign` (the follow-up was lost): (policy, a new rollout run).
    """
    policy = policy_with_model(name)
    bc_runs = Run.objects.filter(kind="bc", config__policy_name=name)
    if policy is None:
        active = bc_runs.filter(status__in=ACTIVE).order_by("-created_at").first()
        if active is not None:
            return None, active
        config = {"policy_name": name}
        if campaign is not None:
            config.update(rollout_campaign_id=campaign.pk, rollout_tasks=tasks, rollout_samples=samples)
        # A key per attempt, after the last run: two starts racing launch one run, and a run that
        # failed or was cancelled is followed by a new one.
        last = bc_runs.order_by("-pk").values_list("pk", flat=True).first() or 0
        key = f"policy-after-{last}-{name}"[:64]
        return None, run_launch(
            kind="bc", user=user, name=f"Policy {name} (behaviour cloning)", config=config, idempotency_key=key
        )
    if campaign is None:
        return policy, None
    rollouts = Run.objects.filter(kind="rollout", config__campaign_id=campaign.pk)
    filling = rollouts.filter(status__in=(*ACTIVE, Run.Status.SUCCEEDED)).order_by("-created_at").first()
    if filling is not None or campaign.comparisons.exists():
        return policy, filling if filling is not None and filling.status in ACTIVE else None
    last = rollouts.order_by("-pk").values_list("pk", flat=True).first() or 0
    return policy, policy_rollouts_launch(
        policy=policy,
        campaign=campaign,
        tasks=tasks,
        samples=samples,
        user=user,
        idempotency_key=f"rollouts-{campaign.pk}-after-{last}",
    )


def policy_rollouts_store(
    *,
    policy: Policy,
    split: str,
    n_tasks: int,
    samples: int,
    temperature: float,
    campaign: Campaign | None,
    seed: int = 0,
    progress=None,
    device: str = "cpu",
    environment: str = "encyclopedia",
    task_ids: list[str] = (),
    max_action_tokens: int = MAX_ACTION_TOKENS,
    max_context: int = MAX_CONTEXT,
    pairing: str = "all_pairs",
    answer_branches: int = 0,
    answer_pairs_per_task: int = 2,
    run=None,
) -> dict:
    """Roll the policy out on an environment's tasks; store each episode as a trajectory of that
    policy (recording `run`, the rollout run, on the new rows); with a campaign, pair this
    rollout's episodes of each task by `pairing` (a strategy of annotate/services/comparisons.py)
    into comparisons.

    `answer_branches`: from every episode that answered after reading, this many more
    episodes that take the same path and sample the final answer afresh (stored with
    `branch_of` in their metadata); with a campaign, up to `answer_pairs_per_task` more pairs
    per task that made the same calls and answered differently (docs/loop.md)."""
    # Lazy: training.policy.rollout loads torch, which the web process (it imports this module) never does.
    from training.policy.rollout import RolloutConfig, rollout
    from training.policy.rollout import answer_branches as branch

    if not policy.model_dir:
        raise ArbiterError(f"Policy {policy} has no model directory to run.")
    if samples < 1 or n_tasks < 1:
        raise ArbiterError("tasks and samples must be at least 1.")
    env = environment_get(environment)
    tasks = environment_tasks(env, split, n_tasks, task_ids=list(task_ids))
    if not tasks:
        raise ArbiterError(f"Environment {env.name} has no {split} tasks.")
    model, tokenizer = load_policy(policy.model_dir, device=device)
    repeated = [t for t in tasks for _ in range(samples)]
    seeds = [seed * 100_000 + i for i in range(len(repeated))]
    config = RolloutConfig(temperature=temperature, max_action_tokens=max_action_tokens, max_context=max_context)
    runner = EpisodeRunner(env)
    share = 0.7 if answer_branches else 1.0  # of the progress bar
    episodes = rollout(
        model, tokenizer, runner, repeated, config, seeds=seeds, progress=progress and (lambda f: progress(share * f))
    )
    branches, unreplayable = ([], 0)
    if answer_branches:
        branches, unreplayable = branch(
            model,
            tokenizer,
            runner,
            episodes,
            config,
            branches=answer_branches,
            seeds=seeds,
            progress=progress and (lambda f: progress(share + (1 - share) * f)),
        )
    report = policy_episodes_store(episodes=episodes, policy=policy, metadata={"temperature": temperature}, run=run)
    sources = [(source_id, branch) for source_id, found in zip(report.trajectory_ids, branches) for branch in found]
    branch_ids = (
        policy_episodes_store(
            episodes=[branch for _, branch in sources],
            policy=policy,
            metadata={"temperature": temperature},
            each=[{"branch_of": source_id} for source_id, _ in sources],
            run=run,
        ).trajectory_ids
        if sources
        else []
    )
    comparisons = answer_pairs = 0
    if campaign is not None:
        comparisons, answer_pairs = _pair_rollouts(
            campaign, report.trajectory_ids, branch_ids, samples, pairing, answer_pairs_per_task, seed
        )
    success = sum(e.outcome.correct for e in episodes) / len(episodes)
    return {
        "trajectories": report.created,
        "duplicates": report.duplicates,
        "comparisons": comparisons,
        "answer_pairs": answer_pairs,
        "branches": len(set(branch_ids) - set(report.trajectory_ids)),
        "unreplayable": unreplayable,
        "success": success,
        "environment": env.name,
    }


def _pair_rollouts(campaign, trajectory_ids, branch_ids, samples, pairing, answer_pairs_per_task, seed):
    """(comparisons, answer pairs among them) built in `campaign` from a rollout's trajectories:
    the natural pairs by `pairing`, then pairs that made the same calls and answered differently."""
    natural = max(1, samples * (samples - 1) // 2 if pairing != "all_pairs" else samples)
    task_ids = list(Trajectory.objects.filter(pk__in=trajectory_ids).values_list("task_id", flat=True).distinct())
    comparisons = comparisons_build(
        campaign=campaign,
        task_ids=task_ids,
        trajectory_ids=trajectory_ids,
        max_per_task=natural,
        strategy=pairing,
        seed=seed,
    )
    answer_pairs = 0
    if branch_ids:  # on top of the natural ones
        answer_pairs = comparisons_build(
            campaign=campaign,
            task_ids=task_ids,
            trajectory_ids=[*trajectory_ids, *branch_ids],
            max_per_task=natural + answer_pairs_per_task,
            strategy="same_calls_different_answer",
            seed=seed,
        )
    return comparisons + answer_pairs, answer_pairs


def policy_episodes_store(*, episodes, policy: Policy, metadata: dict, each: list[dict] | None = None, run=None):
    """Store rollout episodes as generated trajectories of `policy` (canonical form, structured
    tool calls, the tools in the metadata), each with its agent token count, `metadata` and its
    own entry of `each` (one dict per episode) when given; an episode already stored keeps its
    row. Returns the import report (`trajectory_ids` in episode order)."""
    objects = [_without_nul(e.trajectory(agent=policy.name, version=policy.version)) for e in episodes]
    for index, obj in enumerate(objects):
        obj["metadata"].update(metadata, **(each[index] if each else {}))
    report = trajectories_import_objects(objects=objects, run=run)
    Trajectory.objects.filter(pk__in=report.trajectory_ids, source=Trajectory.Source.IMPORTED).update(
        source=Trajectory.Source.GENERATED
    )
    return report


def _without_nul(value):
    """A sampled action may decode to a NUL byte, which database text cannot hold: it becomes U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {k: _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def policy_dir_problems(
    model_dir: str | Path, *, tool_parser: str = "", environment: str = "encyclopedia"
) -> list[str]:
    """Why a directory cannot be a policy in `environment`: not a causal LM, no chat template, no
    tool-call parser for it, or a template that cannot render an episode of the environment."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        return [f"{path}: no config.json, so not a Hugging Face model directory."]
    try:
        config = AutoConfig.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (ValueError, OSError, KeyError) as exc:
        return [f"{path}: cannot be loaded ({exc})."]
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return [f"{path}: a {config.model_type} model is not a causal language model."]
    try:
        chat = ChatFormat.for_policy(tokenizer, path, parser=tool_parser)
        env = environment_get(environment)
        runner = EpisodeRunner(env)
        task = (env.tasks("train") or env.tasks("dev") or env.tasks("eval"))[0]
        tools = [t.as_openai() for t in runner.tools.values()]
        messages = env.opening_messages(task)
        chat.opening(messages, tools)
        probe = [
            *messages,
            {"role": "assistant", "content": "x"},
            {"role": "tool", "tool_call_id": "call_0", "name": "probe", "content": "y"},
        ]
        chat.continuation(probe, tools, 1)
    except ChatTemplateError as exc:
        return [f"{path}: {exc}"]
    except IndexError:
        return [f"environment {environment!r}: it has no tasks"]
    except Exception as exc:  # noqa: BLE001 - an unknown environment, or one that fails to start in any way
        return [f"environment {environment!r}: {exc}"]
    return []


def policy_register(
    *,
    name: str,
    version: str,
    model_dir: str | Path,
    tool_parser: str = "",
    environment: str = "encyclopedia",
    progress=lambda _: None,
) -> Policy:
    """Register a Hugging Face chat model directory as a policy, after checking it can play the
    environment. An agent already known by name and version (from imported transcripts) gets
    the model, so its rollouts and its logged transcripts are one policy's. `model_dir` may
    also be a GGUF source (a .gguf file, or `package:NAME` that ships one): it is converted
    once into the policy store (training/policy/gguf.py), `progress` told each stage."""
    if is_gguf_source(model_dir):
        try:
            model_dir = gguf_convert(gguf_source(model_dir), Path(settings.VAR_DIR) / "policies", progress=progress)
        except GgufError as exc:
            raise ArbiterError(str(exc)) from None
    path = Path(model_dir).expanduser().resolve()
    problems = policy_dir_problems(path, tool_parser=tool_parser, environment=environment)
    if problems:
        raise ArbiterError(" ".join(problems))
    if not name.strip() or len(name) > 200 or len(version) > 100:
        raise ArbiterError("name: 1 to 200 characters; version: at most 100.")
    existing = Policy.objects.filter(name=name, version=version).first()
    if existing and existing.model_dir and Path(existing.model_dir).resolve() != path:
        raise ArbiterError(f"Policy {existing} already has a model, at {existing.model_dir}.")
    if tool_parser:
        carry_policy_file(path, path, tool_parser=tool_parser)

    parser, how = tool_parser_of(path)
    metadata = {
        **(existing.metadata if existing else {}),
        "registered_from": str(path),
        "tool_parser": parser,
        "tool_parser_chosen": how,
    }
    policy, _ = Policy.objects.update_or_create(
        name=name, version=version, defaults={"model_dir": str(path), "metadata": metadata}
    )
    return policy
