"""Django glue for the policy: build the default policy once, store rollouts as trajectories."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from django.conf import settings

from annotate.models import Campaign, Policy, Trajectory
from annotate.services.comparisons import comparisons_build
from annotate.services.imports import trajectories_import_objects
from training.env.browser import TextBrowser
from training.env.corpus import generate_corpus, generate_tasks
from training.env.scripted import episode_to_trajectory
from training.policy.evaluation import success_rates
from webapp.errors import ArbiterError

DEFAULT_POLICY = "default-bc"


class PolicyTrainingStopped(Exception):
    """Behaviour cloning was stopped (cancelled) before it finished; nothing was saved."""


def default_policy_dir() -> Path:
    return Path(settings.VAR_DIR) / "policies" / DEFAULT_POLICY


def policy_train_default(*, config=None, force: bool = False, progress=None, log=print, metrics=None,
                         should_stop=None, name: str = DEFAULT_POLICY, target: Path | None = None,
                         run=None) -> Policy:
    """Train a policy by behaviour cloning into `target` (the default policy unless given).

    The default policy is trained once and reused unless `force`. `should_stop()` ends
    training early (a cancelled run); the caller decides what a stopped run means.
    """
    import torch

    from training.policy.bc import (
        BCConfig,
        demonstration_texts,
        demonstrations,
        train_bc,
    )
    from training.policy.model_io import build_model, save_policy, train_tokenizer

    target = target or default_policy_dir()
    existing = Policy.objects.filter(name=name, model_dir=str(target)).order_by("-created_at").first()
    if existing and (target / "config.json").exists() and not force:
        return existing
    torch.set_num_threads(max(1, torch.get_num_threads()))
    config = config or BCConfig()
    corpus = generate_corpus(seed=0)
    tasks = generate_tasks(corpus, seed=0)
    train = [t for t in tasks if t.split == "train"]
    evaluation = [t for t in tasks if t.split == "eval"]
    started = time.monotonic()
    log("Training the tokenizer and building the demonstrations ...")
    tokenizer = train_tokenizer(demonstration_texts(corpus, train, config), vocab_size=config.vocab_size)
    examples = demonstrations(corpus, train, tokenizer, config)
    model = build_model(tokenizer, hidden=config.hidden, layers=config.layers, heads=config.heads, seed=config.seed)
    log(f"Behaviour cloning a {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M-parameter policy on "
        f"{len(examples)} demonstrations ...")
    result = train_bc(model, tokenizer, examples, config, progress=progress, metrics=metrics, should_stop=should_stop)
    if should_stop and should_stop():
        raise PolicyTrainingStopped(f"stopped after {result['steps']} steps")
    log(f"Evaluating on {len(evaluation)} eval tasks (greedy and temperature 1) ...")
    figures = success_rates(model, tokenizer, TextBrowser(corpus), evaluation)
    save_policy(model, tokenizer, target)
    report = {"bc": {k: v for k, v in result.items() if k != "config"}, "eval": figures,
              "config": asdict(config), "total_seconds": round(time.monotonic() - started, 1)}
    (target / "arbiter_policy.json").write_text(json.dumps(report, indent=2, default=str))
    version = time.strftime("%Y%m%d-%H%M%S")
    policy, _ = Policy.objects.update_or_create(
        name=name, version=version,
        defaults={"model_dir": str(target), "metadata": report, "run": run},
    )
    return policy


def policy_rollouts_store(*, policy: Policy, split: str, n_tasks: int, samples: int, temperature: float,
                          campaign: Campaign | None, seed: int = 0, progress=None, device: str = "cpu") -> dict:
    """Roll the policy out on tasks; store each episode as a trajectory of that policy."""
    from training.policy.model_io import load_policy
    from training.policy.rollout import RolloutConfig, rollout

    if not policy.model_dir:
        raise ArbiterError(f"Policy {policy} has no model directory to run.")
    if samples < 1 or n_tasks < 1:
        raise ArbiterError("tasks and samples must be at least 1.")
    model, tokenizer = load_policy(policy.model_dir, device=device)
    corpus = generate_corpus(seed=0)
    tasks = [t for t in generate_tasks(corpus, seed=0) if t.split == split][:n_tasks]
    repeated = [t for t in tasks for _ in range(samples)]
    episodes = rollout(model, tokenizer, TextBrowser(corpus), repeated,
                       RolloutConfig(temperature=temperature), seeds=[seed * 100_000 + i for i in range(len(repeated))],
                       progress=progress)
    report = policy_episodes_store(episodes=episodes, policy=policy, metadata={"temperature": temperature})
    comparisons = 0
    if campaign is not None:
        task_ids = list(Trajectory.objects.filter(pk__in=report.trajectory_ids).values_list("task_id", flat=True)
                        .distinct())
        comparisons = comparisons_build(campaign=campaign, task_ids=task_ids, max_per_task=max(1, samples))
    success = sum(e.outcome.correct for e in episodes) / len(episodes)
    return {"trajectories": report.created, "duplicates": report.duplicates, "comparisons": comparisons,
            "success": success}


def policy_episodes_store(*, episodes, policy: Policy, metadata: dict):
    """Store rollout episodes as generated trajectories of `policy`, each with its agent token
    count and `metadata`; an episode already stored keeps its row. Returns the import report
    (`trajectory_ids` in episode order)."""
    objects = [_without_nul(episode_to_trajectory(e.task, e.episode, e.outcome, agent=policy.name,
                                                  version=policy.version)) for e in episodes]
    for obj, e in zip(objects, episodes):
        obj["metadata"].update({"agent_tokens": e.agent_tokens, **metadata})
    report = trajectories_import_objects(objects=objects)
    Trajectory.objects.filter(pk__in=report.trajectory_ids, source=Trajectory.Source.IMPORTED).update(
        source=Trajectory.Source.GENERATED)
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
