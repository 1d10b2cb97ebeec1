"""Django glue for PPO: feed training/rl/trainer.py the policy, the reward model and the tasks;
register each checkpoint as a policy with its lineage (dataset -> reward model -> policy)."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from annotate.models import Policy
from training.envs.base import EpisodeRunner, demonstrator_problem, rl_world_seeds
from training.envs.services import environment_get, environment_world
from training.envs.worlds import WorldStream, stage_stream
from training.policy.bc_config import BCConfig
from training.policy.chat import ChatFormat
from training.policy.model_io import load_policy
from training.rl.dev import dev_world as judged_in
from training.rl.scorers import reward_model_scorer, rubric_scorer
from webapp.errors import ArbiterError


def checkpoint_policy_register(
    *, run, start: Policy, name: str, iteration: int, path: str, dev: dict, reward: dict
) -> Policy:
    """A PPO checkpoint as a policy (`name@iter-NNNN`), child of the starting policy. Saving the
    same iteration again (a resumed run) updates the row."""
    policy, _ = Policy.objects.update_or_create(
        name=name,
        version=f"iter-{iteration:04d}",
        defaults={
            "model_dir": path,
            "parent": start,
            "run": run,
            "metadata": {"ppo": {"iteration": iteration, "run_id": run.pk if run else None, "dev": dev, **reward}},
        },
    )
    return policy


@transaction.atomic
def best_checkpoint_mark(*, name: str, iteration: int | None) -> Policy | None:
    """Flag the best checkpoint by dev rubric (and only it) among a run's policies."""
    best = None
    for policy in Policy.objects.select_for_update().filter(name=name):
        ppo = dict(policy.metadata.get("ppo", {}))
        ppo["best"] = iteration is not None and policy.version == f"iter-{iteration:04d}"
        policy.metadata = {**policy.metadata, "ppo": ppo}
        policy.save(update_fields=["metadata", "updated_at"])
        best = policy if ppo["best"] else best
    return best


def rl_train(
    *,
    run,
    start: Policy,
    reference: Policy,
    reward_model,
    reward: str,
    config,
    out_dir: Path,
    name: str,
    callbacks,
    resume_from: str | None,
    device: str,
    environment: str = "encyclopedia",
    dev_environment: str = "",
    train_worlds: int = 0,
    fresh_worlds: bool = False,
):
    """Run PPO from `start` on `environment`'s training tasks and every task of `train_worlds`
    other worlds of it (or, with `fresh_worlds`, every iteration on a world of its own), choosing checkpoints on `dev_environment`'s tasks (default: the
    environment's fresh variant where it has one, training/envs/registry.py); every
    checkpoint becomes a policy called `name`. Returns RLResult."""
    # Lazy: training.rl.trainer loads torch, which the web process (it imports this module) never does.
    from training.rl.trainer import train_rl, train_rl_in_processes

    if reward == "reward_model" and reward_model is None:
        raise ArbiterError("PPO against a reward model needs one.")
    arguments = {
        "environment": environment,
        "dev_environment": dev_environment,
        "dev_size": config.dev_tasks,
        "train_worlds": train_worlds,
        "fresh_worlds": fresh_worlds,
        "seed": config.seed,
        "reward": reward,
        "reward_model_dir": reward_model.model_dir if reward == "reward_model" else None,
        "ensemble_penalty": config.ensemble_penalty,
        "device": device,
    }
    names = {  # for the lineage; each process builds the rest for itself
        "environment": environment_get(environment).name,
        "dev_environment": dev_world(environment, dev_environment, config.dev_tasks)[0].name,
    }
    lineage = (
        {"reward": "reward_model", "reward_model_id": reward_model.pk, "snapshot_id": reward_model.snapshot_id}
        if reward == "reward_model"
        else {"reward": reward}
    )
    saved = callbacks.policy_saved

    def register(iteration: int, path: str, dev: dict) -> None:
        checkpoint_policy_register(
            run=run,
            start=start,
            name=name,
            iteration=iteration,
            path=path,
            dev=dev,
            reward={**lineage, **names},
        )
        saved(iteration, path, dev)

    callbacks.policy_saved = register
    common = dict(
        policy_dir=start.model_dir,
        reference_dir=reference.model_dir,
        config=config,
        out_dir=out_dir,
        callbacks=callbacks,
        resume_from=resume_from,
        device=device,
    )
    if config.processes > 1:
        return train_rl_in_processes(inputs="training.rl.app_inputs:app_inputs", arguments=arguments, **common)
    built = rl_inputs(**arguments)
    return train_rl(
        scorer=built["scorer"],
        train_tasks=built["train_tasks"],
        runner=built["runner"],
        dev_runner=built["dev_runner"],
        dev_tasks=built["dev_tasks"],
        **common,
    )


def rl_inputs(
    *,
    environment: str,
    dev_environment: str,
    dev_size: int,
    train_worlds: int,
    reward: str,
    reward_model_dir: str | None,
    ensemble_penalty: float,
    device: str,
    fresh_worlds: bool = False,
    seed: int = 0,
) -> dict:
    """What RL plays and is scored by, built in each process that plays (training/rl/rl_rank.py):
    the scorer, the training tasks and their runner, the dev tasks and theirs."""
    if reward == "reward_model":
        scorer = reward_model_scorer(reward_model_dir, device=device, ensemble_penalty=ensemble_penalty)
    else:
        scorer = rubric_scorer(utility=reward == "utility")
    env = environment_get(environment)
    dev_env, dev_tasks = dev_world(environment, dev_environment, dev_size)
    tasks, runner = training_tasks(environment, env, train_worlds, fresh_worlds=fresh_worlds, seed=seed)
    return {
        "scorer": scorer,
        "train_tasks": tasks,
        "runner": runner,
        "dev_tasks": dev_tasks,
        "dev_runner": EpisodeRunner(dev_env),
    }


def dev_world(environment: str, dev_environment: str, size: int):
    """(the environment RL is judged in, its dev tasks), from the app's environments
    (training/rl/dev.py). Raises UnknownEnvironment for one that does not exist."""
    return judged_in(environment, dev_environment, size, get=environment_get)


def training_tasks(name: str, env, train_worlds: int, *, fresh_worlds: bool = False, seed: int = 0):
    """(tasks, runner) RL trains on: the environment's training tasks, and every task of
    `train_worlds` other worlds of it (training/envs/base.py rl_world_seeds), each played in
    its own world (`runner(task)`); or, with `fresh_worlds`, a function giving each
    iteration the tasks of a world of its own (training/envs/worlds.py)."""
    if fresh_worlds:
        stream = WorldStream(lambda world: environment_world(name, world), stream=stage_stream("rl", seed))
        return stream.tasks, stream.runner
    main = EpisodeRunner(env)
    if not train_worlds:
        return env.tasks("train"), main
    tasks, runners = list(env.tasks("train")), {}
    for seed in rl_world_seeds(train_worlds):
        world = environment_world(name, seed)
        world_runner = EpisodeRunner(world)
        for split in ("train", "dev", "eval"):
            for task in world.tasks(split):
                tasks.append(task)
                runners[id(task)] = world_runner
    return tasks, lambda task: runners.get(id(task), main)


def expert_iteration_train(
    *,
    run,
    start: Policy,
    reward_model,
    config,
    out_dir: Path,
    name: str,
    callbacks,
    resume_from: str | None,
    environment: str,
    dev_environment: str,
    dev_tasks: int,
    fresh_worlds: bool,
    anchor: bool,
):
    """Expert iteration (training/rl/expert_iteration.py) from `start` on `environment`: each
    round's tasks from a world of its own (`fresh_worlds`) or its training tasks; the kept
    samples mixed with the environment's demonstrations (`anchor`, where it has a
    demonstrator); every round's checkpoint a policy called `name`. Returns its result."""
    # Lazy: training.policy.bc loads torch, which the web process (it imports this module) never does.
    from training.policy.bc import demonstrations, play_demonstrations

    # Lazy: training.rl.expert_iteration loads torch, which the web process (it imports this module) never does.
    from training.rl.expert_iteration import expert_iteration

    env = environment_get(environment)
    dev_env, judged_on = dev_world(environment, dev_environment, dev_tasks)
    if fresh_worlds:
        stream = WorldStream(
            lambda world: environment_world(environment, world), stream=stage_stream("expert_iteration", config.seed)
        )
        tasks_for_round, runner = stream.tasks, stream.runner
    else:
        train = env.tasks("train")
        tasks_for_round, runner = (lambda _round: train), EpisodeRunner(env)
    examples = None
    if anchor and demonstrator_problem(env) is None:
        _, tokenizer = load_policy(start.model_dir)
        chat = ChatFormat.for_policy(tokenizer, start.model_dir)
        played = play_demonstrations(
            env,
            BCConfig(environment=environment, extra_worlds=0, seed=config.seed),
            parser=chat.parser_name,
        )
        examples = demonstrations(chat, played)
        callbacks.log(f"Anchors: {len(examples)} demonstrations of {env.name}, in the policy's own format.")
    elif anchor:
        callbacks.log(f"No anchors: {env.name} has no scripted demonstrator.")
    saved = callbacks.policy_saved
    lineage = {"method": "expert_iteration", "selection": config.selection, "environment": env.name}
    if reward_model is not None:
        lineage |= {"reward_model_id": reward_model.pk, "snapshot_id": reward_model.snapshot_id}

    def register(round_: int, path: str, dev: dict) -> None:
        checkpoint_policy_register(
            run=run, start=start, name=name, iteration=round_, path=path, dev=dev, reward={**lineage, "round": round_}
        )
        saved(round_, path, dev)

    callbacks.policy_saved = register
    return expert_iteration(
        policy_dir=start.model_dir,
        tasks_for_round=tasks_for_round,
        runner=runner,
        dev_tasks=judged_on,
        dev_runner=EpisodeRunner(dev_env),
        config=config,
        out_dir=out_dir,
        scorer=reward_model_scorer(reward_model.model_dir) if reward_model is not None else None,
        anchor=examples,
        callbacks=callbacks,
        resume_from=resume_from,
    )
