"""Django glue for PPO: feed training/ppo.py the policy, the reward model and the tasks;
register each checkpoint as a policy with its lineage (dataset -> reward model -> policy)."""
from __future__ import annotations

from pathlib import Path

from django.db import transaction

from annotate.models import Policy
from webapp.errors import ArbiterError


def checkpoint_policy_register(*, run, start: Policy, name: str, iteration: int, path: str, dev: dict,
                               reward: dict) -> Policy:
    """A PPO checkpoint as a policy (`name@iter-NNNN`), child of the starting policy. Saving the
    same iteration again (a resumed run) updates the row."""
    policy, _ = Policy.objects.update_or_create(
        name=name, version=f"iter-{iteration:04d}",
        defaults={"model_dir": path, "parent": start, "run": run,
                  "metadata": {"ppo": {"iteration": iteration, "run_id": run.pk if run else None, "dev": dev,
                                       **reward}}})
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


def ppo_train(*, run, start: Policy, reference: Policy, reward_model, reward: str, config, out_dir: Path,
              name: str, callbacks, resume_from: str | None, device: str):
    """Run PPO from `start`; every checkpoint becomes a policy called `name`. Returns PPOResult."""
    from training.env.world import main_world
    from training.ppo import train_ppo
    from training.scorers import reward_model_scorer, rubric_scorer

    if reward == "reward_model":
        if reward_model is None:
            raise ArbiterError("PPO against a reward model needs one.")
        scorer = reward_model_scorer(reward_model.model_dir, device=device)
        lineage = {"reward": "reward_model", "reward_model_id": reward_model.pk,
                   "snapshot_id": reward_model.snapshot_id}
    else:
        scorer = rubric_scorer(utility=reward == "utility")
        lineage = {"reward": reward}
    world = main_world()
    saved = callbacks.policy_saved

    def register(iteration: int, path: str, dev: dict) -> None:
        checkpoint_policy_register(run=run, start=start, name=name, iteration=iteration, path=path, dev=dev,
                                   reward=lineage)
        saved(iteration, path, dev)

    callbacks.policy_saved = register
    return train_ppo(policy_dir=start.model_dir, reference_dir=reference.model_dir, scorer=scorer,
                     train_tasks=world.split("train"), dev_tasks=world.split("dev"), browser=world.browser,
                     config=config, out_dir=out_dir, callbacks=callbacks, resume_from=resume_from, device=device)
