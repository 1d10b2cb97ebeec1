"""Rounds of the loop, each an ordinary set of runs:

    collect   roll out the round's starting policy on training tasks into the round's campaign;
              label it (simulated annotators), or wait for people
    train     dataset of every label of the loop so far -> reward model -> RL from the round's
              start, KL to round one's start -> evaluation on held-out tasks -> the blind audit
              of what the new reward model scores highest

Round one starts from the pipeline's policy; round n + 1 starts from round n's result (its
RL run's best checkpoint by dev, else its last). A round records each piece as it is made,
so a round stopped anywhere (a crash, a cancel) goes on from where it was.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from annotate.models import Campaign, DatasetSnapshot, Judgement, Policy
from annotate.services.datasets import SnapshotFilters, snapshot_build, snapshot_create
from core.configs import config_from_input
from rewardmodel.models import ComparisonScore, RewardModel
from rewardmodel.scoring import RewardScorer
from rewardmodel.services import comparisons_score, snapshot_problems
from training.envs.registry import variant_of
from training.envs.utility import RubricWeights
from training.loop.audit import audit_create, disagreement_candidates, top_candidates
from training.loop.config import BASELINES, PipelineConfig, bc_settings
from training.models import Evaluation, LoopRound
from training.policy.bc_config import BCConfig
from training.policy.chat import ChatFormat
from training.policy.model_io import build_model, load_policy, save_policy
from training.rl.config import RLConfig, deploy_words
from training.simulated_annotators import AnnotatorProfile
from training.simulated_corrections import campaign_simulate_corrections
from training.simulation import campaign_simulate_labels
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.services import RunCancelled, run_cancel, run_execute, run_launch

Progress = Callable[[float, str], None]
Stage = Callable[[str], Progress]
LABELS = ("simulated", "people")
MIN_JUDGED = 10  # judged comparisons a round needs before its reward model is trained


def pipeline_user():
    """The user every pipeline run is launched by (it cannot log in)."""
    user, created = get_user_model().objects.get_or_create(username="pipeline", defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def run_in_process(
    *, kind: str, config: dict, name: str, user, progress: Progress, should_stop: Callable[[], bool] | None = None
) -> Run:
    """Launch a run (refused configs raise ArbiterError) and execute it here, reporting its
    progress. When `should_stop()` turns true the run is cancelled and RunCancelled raised."""
    run = run_launch(kind=kind, config=config, user=user, name=name, enqueue=False)

    def execute() -> None:
        try:
            run_execute(run_id=run.pk, attempt=run.attempt)
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=execute, daemon=True)
    worker.start()
    cancelled = False
    while worker.is_alive():
        worker.join(timeout=0.5)
        current = Run.objects.only("progress", "progress_message", "status").get(pk=run.pk)
        progress(current.progress, current.progress_message)
        if should_stop and not cancelled and should_stop() and current.status == Run.Status.RUNNING:
            run_cancel(run_id=run.pk)
            cancelled = True
    run.refresh_from_db()
    if cancelled:
        raise RunCancelled()
    if run.status != Run.Status.SUCCEEDED:
        raise ArbiterError(f"The {kind} run #{run.pk} {run.status}: {run.error or run.progress_message}")
    progress(1.0, "done")
    return run


def loop_config(loop_round):
    """The loop's settings as a PipelineConfig (fields added since it was saved get defaults)."""
    names = {f.name for f in fields(PipelineConfig)}
    return PipelineConfig(**{k: v for k, v in loop_round.config.items() if k in names})


def eval_environment(config) -> str:
    """Where a loop is evaluated: its `eval_environment`, else the environment's unseen
    variant where it has one (names no training step saw), else the environment itself."""
    return config.eval_environment or variant_of(config.environment, "unseen")


def _timed(loop_round, label: str, started: float) -> None:
    loop_round.seconds = {**loop_round.seconds, label: round(time.monotonic() - started, 1)}
    loop_round.save(update_fields=["seconds", "updated_at"])


# --- Starting rounds ---------------------------------------------------------------------


def round_first(*, loop: str, config, policy, user):
    """Round one of a new loop, from `policy` (which is also every round's KL reference)."""
    if LoopRound.objects.filter(loop=loop).exists():
        raise ArbiterError(f"A loop named {loop!r} exists already; choose another name.")
    return LoopRound.objects.create(
        loop=loop,
        number=1,
        config=asdict(config),
        start_policy=policy,
        reference_policy=policy,
        labels="simulated",
        created_by=user,
    )


def round_next(*, previous, labels: str, user):
    """The round after `previous` (which must be done), from its result."""
    if labels not in LABELS:
        raise ArbiterError(f"labels: one of {', '.join(LABELS)}.")
    if previous.stage != LoopRound.Stage.DONE or previous.policy_id is None:
        raise ArbiterError(f"{previous} has not finished; the next round starts from its result.")
    with transaction.atomic():
        if LoopRound.objects.select_for_update().filter(loop=previous.loop, number__gt=previous.number).exists():
            raise ArbiterError(f"{previous.loop} has a round after {previous.number} already.")
        return LoopRound.objects.create(
            loop=previous.loop,
            number=previous.number + 1,
            config=previous.config,
            start_policy=previous.policy,
            reference_policy=previous.reference_policy,
            labels=labels,
            created_by=user,
        )


# --- Collect -----------------------------------------------------------------------------


def annotator_profile(config):
    """The simulated annotators a loop's settings describe (validate() says what is wrong with them)."""
    return AnnotatorProfile(
        temperature=config.annotator_temperature,
        flip=config.annotator_flip,
        weights=replace(RubricWeights(), correct=config.annotator_correct_weight),
        correct_first=config.annotator_correct_first,
        wrong_pairs=config.annotator_wrong_pairs,
    )


def _simulate(campaign: Campaign, config, progress: Progress, seed: int) -> int:

    profile = annotator_profile(config)
    total = campaign.comparisons.count() * campaign.votes_per_comparison
    made = 0
    while True:
        batch = campaign_simulate_labels(
            campaign=campaign, annotators=campaign.votes_per_comparison, profile=profile, seed=seed + made, limit=200
        )
        made += batch
        progress(min(1.0, made / max(1, total)), f"{made} judgements")
        if batch < 200:
            return made


def round_collect(loop_round, *, stage: Stage, user, should_stop=None) -> None:
    """Roll the round's start policy out on training tasks into the round's campaign, and
    label it when the round's labels are simulated (else the round waits for people)."""
    config = loop_config(loop_round)
    started = time.monotonic()
    if loop_round.campaign_id is None:
        name = f"{loop_round} comparisons"[:200]
        if Campaign.objects.filter(name=name).exists():
            raise ArbiterError(f"A campaign named {name!r} exists already; rename it to let the round build its own.")
        loop_round.campaign = Campaign.objects.create(
            name=name,
            votes_per_comparison=config.annotators,
            created_by=user,
            guidelines="Comparisons of the policy's own episodes on training tasks, for the loop's reward model. "
            "A correct, supported answer first; then fewer wasted steps and no tool errors.",
        )
        loop_round.save(update_fields=["campaign", "updated_at"])
    if not loop_round.campaign.comparisons.exists():  # the rollout has not finished (or not started)
        _check_stop(should_stop)
        run = run_in_process(
            kind="rollout",
            name=f"{loop_round} rollouts",
            user=user,
            should_stop=should_stop,
            progress=stage(f"round {loop_round.number}: rollouts and comparisons"),
            config={
                "policy_id": loop_round.start_policy_id,
                "environment": config.environment,
                "split": "train",
                "tasks": config.rollout_tasks,
                "samples_per_task": config.samples_per_task,
                "temperature": 1.0,
                "pairing": config.pairing,
                "campaign_id": loop_round.campaign_id,
                "answer_branches": config.answer_branches,
                "answer_pairs_per_task": config.answer_pairs_per_task,
                "seed": config.seed + 1000 * (loop_round.number - 1),
                "max_action_tokens": config.max_action_tokens,
                "max_context": config.max_context,
            },
        )
        problem = too_few_comparisons(run.summary, loop_round, config)
        if problem:
            raise ArbiterError(problem)
        _timed(loop_round, "rollouts", started)
    _check_stop(should_stop)
    if loop_round.labels == "simulated":
        started = time.monotonic()
        _simulate(
            loop_round.campaign,
            config,
            stage(f"round {loop_round.number}: simulated annotators"),
            seed=config.seed + 1000 * (loop_round.number - 1),
        )
        _timed(loop_round, "labels", started)
        if config.compare_dpo:
            started = time.monotonic()
            _correct(loop_round, config, stage(f"round {loop_round.number}: simulated corrections"), user)
            _timed(loop_round, "corrections", started)
        loop_round.stage = LoopRound.Stage.TRAINING
    else:
        loop_round.stage = LoopRound.Stage.LABELLING
    loop_round.save(update_fields=["stage", "updated_at"])


def _correct(loop_round, config, progress: Progress, user) -> None:
    """A simulated annotator corrects wrong episodes of the round's campaign (for SFT and DPO)."""
    progress(0.0, "fixing wrong episodes")
    counts = campaign_simulate_corrections(
        campaign=loop_round.campaign,
        environment=config.environment,
        limit=config.corrections,
        seed=config.seed + 1000 * (loop_round.number - 1),
        reviewer=user,
    )
    progress(1.0, f"{counts['accepted']} accepted, {counts['rejected']} rejected")


def too_few_comparisons(summary: dict, loop_round, config) -> str | None:
    """Why a round's rollouts cannot train a reward model (fewer comparisons than MIN_JUDGED),
    with what the episodes were like, or None."""
    made = summary.get("comparisons") or 0
    if made >= MIN_JUDGED:
        return None
    played = (summary.get("trajectories") or 0) + (summary.get("duplicates") or 0)
    repeated = summary.get("duplicates") or 0
    return (
        f"The rollouts of {loop_round} built {made} comparisons, and a reward model needs at least {MIN_JUDGED}. "
        f"Of its {played} episodes {repeated} repeated an episode already stored (identical episodes cannot be "
        f"compared), with {summary.get('success', 0):.0%} of them correct: the policy plays its training tasks "
        f"the same way nearly every time"
        + (f" (pairing '{config.pairing}' also keeps only some pairs)" if config.pairing != "all_pairs" else "")
        + ". Raise --samples-per-task, give RL more training tasks, or start from a less certain policy."
    )


def latest_round(loop: str):
    """The loop's newest round (None for an unknown loop)."""
    return LoopRound.objects.filter(loop=loop).select_related("policy", "campaign").order_by("-number").first()


def active_round_run(loop: str) -> Run | None:
    """The `round` run taking this loop further now (queued or running), if any."""
    return Run.objects.filter(kind="round", status__in=Run.ACTIVE, config__loop=loop).order_by("-created_at").first()


def _check_stop(should_stop) -> None:
    """Between stages: a cancel asked of the round stops it here."""
    if should_stop is not None and should_stop():
        raise RunCancelled()


def judged_comparisons(campaign_id: int) -> int:
    return Judgement.objects.filter(comparison__campaign_id=campaign_id).values("comparison_id").distinct().count()


# --- Train -------------------------------------------------------------------------------


# The test split of the loop's dataset: a fifth of the tasks, more where a fifth holds too few
# pairs that are not ties to measure the reward model on (a small environment, whose episodes
# often tie), up to half; tried in this order, the first that gives both splits enough is kept.
TEST_FRACTIONS = (0.2, 0.3, 0.4, 0.5)


def _snapshot(loop_round, config, user, log=lambda line: None) -> DatasetSnapshot:
    """Every label of the loop so far (its rounds' campaigns, never the audits), built here, its
    test split sized to the labels (TEST_FRACTIONS; `log` says when it is not a fifth)."""
    campaigns = list(
        Campaign.objects.filter(
            pk__in=LoopRound.objects.filter(
                loop=loop_round.loop, number__lte=loop_round.number, campaign__isnull=False
            ).values("campaign_id")
        )
    )
    feedback = config.reward_model.get("feedback", "both") if isinstance(config.reward_model, dict) else "both"
    for fraction in TEST_FRACTIONS:
        snapshot = _snapshot_built(loop_round, config, user, campaigns, fraction)
        problems = snapshot_problems(snapshot.pk, feedback=feedback)
        short_of_test = problems and all("test pairs" in p for p in problems)
        if not short_of_test or fraction == TEST_FRACTIONS[-1]:
            break
        snapshot.delete()  # its test split held too few pairs that are not ties: a larger one is tried
    if fraction != TEST_FRACTIONS[0]:
        log(
            f"The dataset's test split is {fraction:.0%} of the tasks, not a fifth: a fifth held too few pairs that "
            f"are not ties to measure the reward model on; this one holds {snapshot.stats.get('test_pairs', '?')} test "
            f"pairs, {snapshot.stats.get('test_ties', '?')} of them ties."
        )
    return snapshot


def _snapshot_built(loop_round, config, user, campaigns, test_fraction: float) -> DatasetSnapshot:

    snapshot = snapshot_create(
        name=f"{loop_round} dataset"[:200],
        campaigns=campaigns,
        seed=config.seed,
        test_fraction=test_fraction,
        filters=SnapshotFilters(include_synthetic=True),
        created_by=user,
    )
    if snapshot.status in DatasetSnapshot.ACTIVE:  # too large to build inline: build it here, not on a worker
        snapshot_build(snapshot_id=snapshot.pk)
        snapshot.refresh_from_db()
    if snapshot.status != DatasetSnapshot.Status.SUCCEEDED:
        raise ArbiterError(f"The dataset of {loop_round} could not be built: {snapshot.message}")
    return snapshot


def _score_loop_comparisons(loop_round, reward_model) -> dict[int, tuple[float, float]]:
    """The round's reward model's scores of both sides of every comparison of the loop so far."""
    scorer = RewardScorer(reward_model.model_dir)
    campaigns = Campaign.objects.filter(
        pk__in=LoopRound.objects.filter(
            loop=loop_round.loop, number__lte=loop_round.number, campaign__isnull=False
        ).values("campaign_id")
    )
    for campaign in campaigns:
        comparisons_score(reward_model=reward_model, campaign=campaign, scorer=scorer)
    return {
        c: (a, b)
        for c, a, b in ComparisonScore.objects.filter(
            reward_model=reward_model, comparison__campaign__in=campaigns
        ).values_list("comparison_id", "score_a", "score_b")
    }


def round_train(loop_round, *, stage: Stage, user, should_stop=None) -> None:
    """Reward model on all labels so far, RL, evaluation and audit; each piece is kept on
    the round as soon as it exists, so a stopped round goes on from the next one."""
    config = loop_config(loop_round)
    if loop_round.campaign_id is None:
        raise ArbiterError(f"{loop_round} has no comparisons yet; collect them first.")
    judged = judged_comparisons(loop_round.campaign_id)
    if judged < MIN_JUDGED:
        raise ArbiterError(
            f"{loop_round} is waiting for labels: {judged} comparisons of its campaign are judged, "
            f"and its reward model needs at least {MIN_JUDGED}."
        )
    loop_round.stage = LoopRound.Stage.TRAINING
    loop_round.save(update_fields=["stage", "updated_at"])
    methods, _ = parse_methods(config.methods)
    steps = (
        ("reward_model", "reward_model_id", _train_reward_model),
        *((("rl", "rl_run_id", _train_rl),) if "rl" in methods else ()),
        *(
            (("expert_iteration", "expert_iteration_run_id", _train_expert_iteration),)
            if "expert_iteration" in methods
            else ()
        ),
        ("choice", "policy_id", _choose),
        *((("sft", "sft_run_id", _train_sft), ("dpo", "dpo_run_id", _train_dpo)) if config.compare_dpo else ()),
        *((("baselines", None, _train_baselines),) if loop_round.number == 1 and config.baselines else ()),
        ("evaluation", "evaluation_id", _evaluate),
    )
    for label, field_name, make in steps:
        if _pending(loop_round, config, field_name):
            _check_stop(should_stop)
            started = time.monotonic()
            make(loop_round, config, stage=stage, user=user, should_stop=should_stop)
            _timed(loop_round, label, started)
    started = time.monotonic()
    _audit(loop_round, config, stage=stage, user=user, should_stop=should_stop)
    _timed(loop_round, "audit", started)
    loop_round.stage = LoopRound.Stage.DONE
    loop_round.save(update_fields=["stage", "updated_at"])


def _pending(loop_round, config, field_name: str | None) -> bool:
    """Whether a step of the round is still to do: the piece it keeps on the round is missing, or
    (the baselines, kept as runs of their own) a named baseline has no policy yet while the
    evaluation that reads them is still to come."""
    if field_name is None:
        wanted, _ = parse_baselines(config.baselines)
        return loop_round.evaluation_id is None and bool(set(wanted) - set(loop_baselines(loop_round, config)))
    return getattr(loop_round, field_name) is None


def _train_reward_model(loop_round, config, *, stage: Stage, user, should_stop) -> None:

    n = loop_round.number
    progress = stage(f"round {n}: dataset of all labels")
    snapshot = _snapshot(loop_round, config, user, log=lambda line: progress(0.5, line))
    progress(1.0, ", ".join(f"{k} {v}" for k, v in snapshot.stats.items() if isinstance(v, int)))
    run = run_in_process(
        kind="reward_model",
        name=f"{loop_round} reward model",
        user=user,
        should_stop=should_stop,
        progress=stage(f"round {n}: reward model"),
        config={
            "snapshot_id": snapshot.pk,
            "name": f"{loop_round.loop}-r{n}-rm",
            "eval_policy_id": loop_round.start_policy_id,
            "tokenizer_dir": loop_round.start_policy.model_dir,
            "seed": config.seed + n - 1,
            **_reward_model_start(loop_round, config),
            **config.reward_model,
        },
    )
    loop_round.reward_model = RewardModel.objects.get(pk=run.summary["reward_model_id"])
    loop_round.save(update_fields=["reward_model", "updated_at"])


def _train_rl(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    seed = config.seed + loop_round.number - 1
    run = _train_method(
        loop_round,
        config.rl_kind,
        config.rl_kind.upper(),
        _rl_config(loop_round, config, seed),
        stage,
        user,
        should_stop,
    )
    loop_round.rl_run = run
    loop_round.save(update_fields=["rl_run", "updated_at"])


def _train_expert_iteration(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    seed = config.seed + loop_round.number - 1
    settings = _expert_iteration_config(loop_round, config, seed)
    run = _train_method(loop_round, "expert_iteration", "expert iteration", settings, stage, user, should_stop)
    loop_round.expert_iteration_run = run
    loop_round.save(update_fields=["expert_iteration_run", "updated_at"])


def _train_method(loop_round, kind: str, title: str, settings: dict, stage: Stage, user, should_stop):
    """One of the round's methods as a run executed here; refused when it kept no checkpoint."""
    run = run_in_process(
        kind=kind,
        name=f"{loop_round} {title}",
        user=user,
        should_stop=should_stop,
        progress=stage(f"round {loop_round.number}: {title}"),
        config=settings,
    )
    _kept_policy(run)
    return run


def _kept_policy(run) -> int:
    """The checkpoint a method's run keeps: its best by dev, else its last."""
    policy_id = run.summary.get("best_policy_id") or run.summary.get("last_policy_id")
    if not policy_id:
        raise ArbiterError(f"The {run.kind} run #{run.pk} registered no checkpoint.")
    return policy_id


METHODS = ("rl", "expert_iteration")


def parse_baselines(text: str) -> tuple[list[str], str | None]:
    """The loop's baselines from "filtered_bc,clean_bc" (in BASELINES' order, none for ""), and the problem if any."""
    given = [b.strip() for b in str(text).split(",") if b.strip()]
    unknown = [b for b in given if b not in BASELINES]
    if unknown:
        return [], (
            f"baselines: any of {', '.join(BASELINES)}, comma-separated; {', '.join(map(repr, unknown))} "
            f"{'is' if len(unknown) == 1 else 'are'} not one."
        )
    return [b for b in BASELINES if b in given], None


def baseline_run_name(loop: str, baseline: str) -> str:
    """The bc run of one of a loop's baselines: "LOOP filtered BC"."""
    return f"{loop} {BASELINES[baseline][0]}"[:200]


def loop_baselines(loop_round, config) -> dict[str, int]:
    """The policies of the loop's baselines trained so far, by baseline (in BASELINES' order): the
    bc runs round one made, succeeded, found by their names among the runs since round one began."""
    wanted, _ = parse_baselines(config.baselines)
    names = {baseline_run_name(loop_round.loop, b): b for b in wanted}
    first = LoopRound.objects.filter(loop=loop_round.loop, number=1).only("created_at").first() if names else None
    if first is None:
        return {}
    found = {}
    for name, summary in (
        Run.objects.filter(kind="bc", status=Run.Status.SUCCEEDED, name__in=names, created_at__gte=first.created_at)
        .order_by("created_at")
        .values_list("name", "summary")
    ):
        if (summary or {}).get("policy_id"):
            found[names[name]] = summary["policy_id"]  # the newest, where a stopped round cloned one twice
    return {b: found[b] for b in wanted if b in found}


def _train_baselines(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    """Round one's baselines, each a bc run of the start's behaviour cloning settings (bc_settings)
    changed only in what it imitates; one trained already (a stopped round) is kept."""
    trained = loop_baselines(loop_round, config)
    for baseline in parse_baselines(config.baselines)[0]:
        if baseline in trained:
            continue
        _check_stop(should_stop)
        label, changes = BASELINES[baseline]
        run_in_process(
            kind="bc",
            name=baseline_run_name(loop_round.loop, baseline),
            user=user,
            should_stop=should_stop,
            progress=stage(f"round {loop_round.number}: {label}"),
            config={
                **bc_settings(config),
                **changes,
                "base_policy_id": _baselines_base(loop_round, config),
                "policy_name": f"{loop_round.loop}-{baseline.replace('_', '-')}",
            },
        )


def _baselines_base(loop_round, config) -> int:
    """What the baselines are cloned into: the loop's bc_base_policy_id where it has one (the start's
    too), else a fresh model of the default architecture with the start's tokenizer, made once per
    loop. Cloned from nothing, a baseline would train its own tokenizer on what it imitates (fewer or
    other episodes than the start's), and the evaluation plays only policies that tokenize as the
    start does (it measures their KL to it); so a baseline differs from the start in its data alone."""
    from django.conf import settings

    if config.bc_base_policy_id:
        return config.bc_base_policy_id
    start = loop_round.reference_policy
    name = f"{loop_round.loop}-baselines-init"
    made = Policy.objects.filter(name=name, metadata__tokenizer_of=start.pk).order_by("-created_at").first()
    if made is not None and (Path(made.model_dir) / "config.json").exists():
        return made.pk
    bc = config_from_input(BCConfig, bc_settings(config))
    _, tokenizer = load_policy(start.model_dir)
    target = Path(settings.VAR_DIR) / "policies" / f"{name}-{start.pk}"
    save_policy(
        build_model(tokenizer, hidden=bc.hidden, layers=bc.layers, heads=bc.heads, seed=bc.seed),
        tokenizer,
        target,
        tool_parser=ChatFormat.for_policy(tokenizer, start.model_dir).parser_name,
    )
    return Policy.objects.update_or_create(
        name=name,
        version=str(start.pk),
        defaults={
            "model_dir": str(target),
            "metadata": {
                "tokenizer_of": start.pk,
                "note": f"untrained: the loop's baselines are cloned into it, with the tokenizer of {start}",
            },
        },
    )[0].pk


def parse_methods(text: str) -> tuple[list[str], str | None]:
    """The loop's methods from "rl,expert_iteration" (in that order), and the problem if any."""
    given = [m.strip() for m in str(text).split(",") if m.strip()]
    if not given or any(m not in METHODS for m in given):
        return [], f"methods: one or both of {', '.join(METHODS)}, comma-separated; got {text!r}."
    return [m for m in METHODS if m in given], None


def method_dev_figures(run) -> dict:
    """A method's kept checkpoint and the start, on the dev tasks its run judged them on (each
    method's run judges the same dev tasks with the same seed: training/rl/dev.py): dev success
    at the run's deploy temperature (`dev_deploy`, what the round is chosen on), at T=1 and greedy."""
    summary = run.summary
    key = "round" if run.kind == "expert_iteration" else "iteration"
    kept = summary.get(f"best_{key}")
    entries = {e[key]: e for e in summary.get("evaluations", [])}
    if kept is None:
        kept = max(entries, default=0)
    start, best = entries.get(0, {}), entries.get(kept, {})
    deploy = float((run.config or {}).get("deploy_temperature", 0.0))
    return {
        "run_id": run.pk,
        "kind": run.kind,
        "policy_id": _kept_policy(run),
        key: kept,
        "deploy_temperature": deploy,
        "dev_deploy": deployed_figure(best, run.config or {}),
        "dev_t1": best.get("dev_success"),
        "dev_greedy": best.get("dev_greedy_success"),
        "start_dev_deploy": deployed_figure(start, run.config or {}),
        "start_dev_t1": start.get("dev_success"),
        "start_dev_greedy": start.get("dev_greedy_success"),
    }


def deployed_figure(entry: dict, settings: dict) -> float | None:
    """Dev success at the run's deploy temperature from one of its summary's evaluations: the
    greedy figure when it deploys greedy, the sampled one when its dev episodes are sampled at it
    (the loop sets eval_temperature to it); None where the run played neither."""
    if entry.get("dev_deploy_success") is not None:
        return entry["dev_deploy_success"]
    deploy = float(settings.get("deploy_temperature", 0.0))
    if deploy == 0:
        return entry.get("dev_greedy_success")
    return entry.get("dev_success") if float(settings.get("eval_temperature", 1.0)) == deploy else None


def method_choice(figures: list[dict]) -> dict:
    """Of the methods' figures (`method_dev_figures`), the one whose kept checkpoint gains most
    over its run's start in dev success at the deploy temperature, the first (RL) on a tie; each
    figure gets its `gain`. Like with like, whatever dev set a run was given."""
    for f in figures:
        f["gain"] = (
            None
            if f["dev_deploy"] is None or f["start_dev_deploy"] is None
            else f["dev_deploy"] - f["start_dev_deploy"]
        )
    return max(figures, key=lambda f: f["gain"] if f["gain"] is not None else float("-inf"))


def _choose(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    """The round's result: of its methods' kept checkpoints, the one whose dev success at the
    deploy temperature (greedy by default: what a user runs, not a mix with T=1, where sharpening
    alone wins) gains most over its run's start; RL on a tie."""
    runs = [r for r in (loop_round.rl_run, loop_round.expert_iteration_run) if r is not None]
    if not runs:
        raise ArbiterError(f"{loop_round} trained no method; its methods are {config.methods!r}.")
    figures = [method_dev_figures(run) for run in runs]
    chosen = method_choice(figures)
    deployed = deploy_words(config.deploy_temperature)
    progress = stage(f"round {loop_round.number}: the result")
    progress(
        1.0,
        "; ".join(
            f"{f['kind']}: {_percent(f['dev_deploy'])} {deployed} on dev (start {_percent(f['start_dev_deploy'])}), "
            f"T=1 {_percent(f['dev_t1'])} (start {_percent(f['start_dev_t1'])})"
            for f in figures
        )
        + f"; kept {chosen['kind']}, chosen on {deployed} dev success",
    )
    loop_round.policy_id = chosen["policy_id"]
    loop_round.choice = {
        "chosen": chosen["kind"],
        "methods": figures,
        "deploy_temperature": config.deploy_temperature,
        "rule": f"the gain over the start in {deployed} dev success (the deploy temperature; T=1 beside)",
    }
    loop_round.save(update_fields=["policy", "choice", "updated_at"])


def _percent(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _train_direct(kind: str, loop_round, config, *, stage: Stage, user, should_stop) -> None:
    """SFT or DPO from the round's start on the round's dataset (the reward model's: every label
    of the loop so far and the accepted corrections), for the comparison with RL."""
    overrides = config.sft if kind == "sft" else config.dpo
    run = run_in_process(
        kind=kind,
        name=f"{loop_round} {kind.upper()}",
        user=user,
        should_stop=should_stop,
        progress=stage(f"round {loop_round.number}: {kind.upper()}"),
        config={
            "policy_id": loop_round.start_policy_id,
            "snapshot_id": loop_round.reward_model.snapshot_id,
            "policy_name": f"{loop_round.loop}-r{loop_round.number}-{kind}",
            "seed": config.seed + loop_round.number - 1,
            **overrides,
        },
    )
    setattr(loop_round, f"{kind}_run", run)
    loop_round.save(update_fields=[f"{kind}_run", "updated_at"])


def _train_sft(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    _train_direct("sft", loop_round, config, stage=stage, user=user, should_stop=should_stop)


def _train_dpo(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    _train_direct("dpo", loop_round, config, stage=stage, user=user, should_stop=should_stop)


def _evaluate(loop_round, config, *, stage: Stage, user, should_stop) -> None:

    settings = _evaluation_config(loop_round, config, stage, user, should_stop)
    run = run_in_process(
        kind="evaluation",
        name=f"{loop_round} evaluation",
        user=user,
        should_stop=should_stop,
        progress=stage(f"round {loop_round.number}: evaluation"),
        config=settings,
    )
    loop_round.evaluation = Evaluation.objects.get(pk=run.summary["evaluation_id"])
    loop_round.save(update_fields=["evaluation", "updated_at"])


def _audit(loop_round, config, *, stage: Stage, user, should_stop) -> None:
    """Open the round's audit (once), and label it when the round's labels are simulated
    (labelling goes on where it stopped)."""
    progress = stage(f"round {loop_round.number}: audit")
    if loop_round.audit_campaign_id is None:
        _check_stop(should_stop)
        scores = _score_loop_comparisons(loop_round, loop_round.reward_model)
        audit_create(
            loop_round=loop_round,
            top=top_candidates(loop_round, config.audit_size),
            disagreements=disagreement_candidates(loop_round, config.audit_disagreements, scores),
            votes=config.annotators,
            created_by=user,
        )
    campaign = loop_round.audit_campaign
    if campaign is not None and loop_round.labels == "simulated":
        _simulate(campaign, config, progress, seed=config.seed + 1000 * loop_round.number + 500)
    progress(1.0, f"{campaign.comparisons.count() if campaign else 0} audit comparisons")


SMALL_POLICY_BYTES = 100_000_000  # a policy below this (weights on disk) trains as a reward model at a higher rate
FROM_POLICY_LEARNING_RATE = 3e-4  # measured on the 0.9M default policy (benchmarks/RESULTS.md, issue 16)
FROM_POLICY_EPOCHS = 8.0  # on the loop's few hundred pairs: 81% held-out against 76% at 3 epochs (RESULTS.md, issue 26)


def _reward_model_start(loop_round, config) -> dict:
    """The reward model's backbone: round one's starting policy (its weights, a new score
    head), as WebGPT and InstructGPT start theirs from the supervised policy, unless the
    loop's settings choose a backbone. A small policy gets a from-scratch-like learning rate
    and more epochs; a large one the backbone defaults for pretrained models."""
    if not config.reward_model_from_policy or "backbone" in config.reward_model:
        return {}
    policy_dir = Path(loop_round.reference_policy.model_dir)
    weights = sum(f.stat().st_size for f in policy_dir.glob("*.safetensors")) or sum(
        f.stat().st_size for f in policy_dir.glob("*.bin")
    )
    start = {"backbone": str(policy_dir)}
    if weights and weights < SMALL_POLICY_BYTES:
        start.update(learning_rate=FROM_POLICY_LEARNING_RATE, epochs=FROM_POLICY_EPOCHS)
    return start


def built_per_seed(config) -> bool:
    """Whether the loop's environment has a fresh variant, so it is built per seed."""
    return variant_of(config.environment, "fresh") != config.environment


def rl_train_worlds(config) -> int:
    """The loop's `rl_train_worlds`: the number given, or with -1 none (where the environment
    is built per seed, RL then plays a fresh world every iteration: `rl_fresh_worlds`)."""
    return max(0, config.rl_train_worlds)


def rl_fresh_worlds(config) -> bool:
    """RL's tasks from a freshly generated world every iteration: the automatic -1 where the
    environment is built per seed (training/envs/worlds.py; measured: benchmarks/RESULTS.md, issue 43)."""
    return config.rl_train_worlds < 0 and built_per_seed(config)


def _expert_iteration_config(loop_round, config, seed: int) -> dict:

    ppo = config.ppo if isinstance(config.ppo, dict) else {}
    return {
        # Judged on RL's dev tasks, episodes and seed, so the round's choice compares like with like.
        "dev_tasks": ppo.get("dev_tasks", RLConfig.dev_tasks),
        "eval_samples": ppo.get("eval_samples", RLConfig.eval_samples),
        "policy_id": loop_round.start_policy_id,
        "environment": config.environment,
        "reward_model_id": loop_round.reward_model_id,
        "fresh_worlds": built_per_seed(config),
        "policy_name": f"{loop_round.loop}-r{loop_round.number}-exit",
        "seed": seed,
        "max_action_tokens": config.max_action_tokens,
        "max_context": config.max_context,
        **_deploy_settings(config),
        **config.expert_iteration,
    }


def _rl_config(loop_round, config, seed: int) -> dict:
    return {
        "policy_id": loop_round.start_policy_id,
        "reference_policy_id": loop_round.reference_policy_id,
        "environment": config.environment,
        "train_worlds": rl_train_worlds(config),
        "fresh_worlds": rl_fresh_worlds(config),
        "reward": "reward_model",
        "reward_model_id": loop_round.reward_model_id,
        "policy_name": f"{loop_round.loop}-r{loop_round.number}",
        "seed": seed,
        "max_action_tokens": config.max_action_tokens,
        "max_context": config.max_context,
        **_deploy_settings(config),
        **config.ppo,
    }


def _deploy_settings(config) -> dict:
    """Both methods choose at the loop's deploy temperature; above 0 their sampled dev episodes are
    played at it, so the round's choice reads the same figure from each run."""
    deploy = config.deploy_temperature
    return {"deploy_temperature": deploy, **({"eval_temperature": deploy} if deploy > 0 else {})}


def _evaluation_config(loop_round, config, stage: Stage, user, should_stop) -> dict:
    """Every round is read against round one's start, on the same held-out tasks and seed."""
    others = []
    if loop_round.number > 1:
        others.append(loop_round.start_policy_id)  # the previous round's result, for this round's own gain
    if loop_round.number == 1 and config.upper_bound:
        others += _upper_bound(loop_round, config, stage, user, should_stop)
    # Round one's baselines in every round: each round is read against round one's start, so each
    # before/after holds what better data (filtered BC) and a clean demonstrator (clean BC) would give.
    others += list(loop_baselines(loop_round, config).values())
    run = loop_round.expert_iteration_run
    if run is not None:  # its kept checkpoint and its last, beside RL's
        others += [
            p for p in dict.fromkeys((run.summary.get("best_policy_id"), run.summary.get("last_policy_id"))) if p
        ]
    for run in (loop_round.sft_run, loop_round.dpo_run):
        if run is not None and run.summary.get("policy_id"):
            others.append(run.summary["policy_id"])  # SFT and DPO beside RL on the same tasks
    return {
        "name": str(loop_round),
        "environment": eval_environment(config),
        "baseline_policy_id": loop_round.reference_policy_id,
        "rl_run_id": loop_round.rl_run_id,
        "policy_ids": ",".join(str(p) for p in others),
        "reward_model_id": loop_round.reward_model_id,
        "best_of_n": config.best_of_n if loop_round.number == 1 else "",
        "split": "eval",
        "tasks": config.eval_tasks,
        # Beside an unseen world, the held-out tasks of the world the start trained on: memorisation shows as a gap.
        **(
            {
                "seen_environment": config.environment,
                "seen_tasks": min(config.eval_seen_tasks, config.eval_tasks or config.eval_seen_tasks),
            }
            if config.eval_seen_tasks and eval_environment(config) != config.environment
            else {}
        ),
        "samples": config.eval_samples,
        "seed": config.seed,
        "max_action_tokens": config.max_action_tokens,
        "max_context": config.max_context,
    }


def _upper_bound(loop_round, config, stage: Stage, user, should_stop) -> list[int]:
    """The ceiling: round one's methods paid by the rubric itself (RL's reward, expert
    iteration's filter), evaluated beside the rest; their kept checkpoints."""
    methods, _ = parse_methods(config.methods)
    kept = []
    if "rl" in methods:
        summary = run_in_process(
            kind=config.rl_kind,
            name=f"{loop_round} {config.rl_kind.upper()} on the rubric",
            user=user,
            should_stop=should_stop,
            progress=stage(f"round 1: {config.rl_kind.upper()} on the rubric"),
            config={
                **_rl_config(loop_round, config, config.seed),
                "reward": "rubric",
                "reward_model_id": 0,
                "policy_name": f"{loop_round.loop}-rubric",
            },
        ).summary
        kept.append(summary.get("best_policy_id") or summary.get("last_policy_id"))
    if "expert_iteration" in methods:
        summary = run_in_process(
            kind="expert_iteration",
            name=f"{loop_round} expert iteration on the rubric",
            user=user,
            should_stop=should_stop,
            progress=stage("round 1: expert iteration on the rubric"),
            config={
                **_expert_iteration_config(loop_round, config, config.seed),
                "selection": "rubric",
                "reward_model_id": 0,
                "policy_name": f"{loop_round.loop}-rubric-exit",
            },
        ).summary
        kept.append(summary.get("best_policy_id") or summary.get("last_policy_id"))
    return [p for p in kept if p]


def round_advance(loop_round, *, stage: Stage, user, should_stop=None, train_waiting: bool = False) -> None:
    """Take a round as far as it can go now: collect, then train. A round waiting for
    people's labels is trained only when asked (`train_waiting`: someone pressed "train")."""
    if loop_round.stage == LoopRound.Stage.COLLECTING:
        round_collect(loop_round, stage=stage, user=user, should_stop=should_stop)
    elif loop_round.stage == LoopRound.Stage.LABELLING and train_waiting:
        loop_round.stage = LoopRound.Stage.TRAINING
    if loop_round.stage == LoopRound.Stage.TRAINING:
        round_train(loop_round, stage=stage, user=user, should_stop=should_stop)
