"""WebGPT-style multi-turn PPO of a chat policy in any environment, against any episode scorer.

One iteration, top to bottom (after CleanRL's ppo.py and TRL <= 0.11's PPOTrainer):

1. rollout: `episodes_per_iteration` training tasks, sampled at `temperature` with the
   batched multi-turn rollout (training/policy/rollout.py);
2. score: the scorer (a reward model, or the rubric for the upper bound) gives each
   finished episode one number, normalised by the mean and spread of the starting
   policy's first batch so `kl_coef` means the same whatever the reward model's scale;
   an optional rubric shaping term (a penalty per invalid action) is added and reported
   apart;
3. old log-probs, values and reference log-probs by one forward pass each over the
   whole episodes (question, actions, observations);
4. rewards: -kl_coef * (log pi - log pi_ref) on every agent token, plus the score at the
   episode's last agent token; GAE over agent tokens only (an observation is not a time
   step); advantages whitened over the batch;
5. `epochs` passes of shuffled minibatches: clipped policy loss, clipped value loss and
   an entropy bonus, all means over agent tokens, so environment tokens get no gradient;
   gradient norm clipped;
6. metrics with namespaced keys; every `eval_every` iterations the rubric on the dev
   tasks, a checkpoint, and the best checkpoint by dev rubric kept. Training stops early
   at the KL budget (nats per episode), on cancel, at the time limit, or when a loss
   stops being finite (the last good checkpoint stays, and the result says why).

With `processes` > 1 (training/rl/rl_rank.py launches them) each process plays, scores and
trains on its share of every batch and the gradients are summed before each step
(core/ranks.py): the same steps as one process, in a fraction of the time.

The policy and its value head share the trunk: the value head is a linear layer on the
last hidden state, trained with `vf_coef` times the value loss. For the first
`value_warmup` iterations only the value head learns (on the trunk's features, the policy
unchanged), so the critic starts from the policy's own returns rather than from zero.

Plain Python and torch, no Django:

    .venv/bin/python -m training.rl.trainer --policy var/policies/default-bc --environment encyclopedia \
        --reward rubric --iterations 20
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from core import parallel
from core.callbacks import RLCallbacks
from core.configs import add_config_arguments, config_from_arguments
from training.envs.base import INVALID_TOOL, EpisodeRunner
from training.envs.registry import get_environment
from training.envs.worlds import WorldStream
from training.evaluation.metrics import episode_figures, mean_of_figures
from training.policy.chat import ChatFormat
from training.policy.model_io import load_policy
from training.policy.rollout import RolloutConfig, rollout
from training.rl.checkpointed_run import CheckpointedRun
from training.rl.config import RLConfig
from training.rl.dev import EvaluationCancelled, dev_world
from training.rl.episode_tensors import EpisodeBatch, episode_batch, forward_agent_tokens, token_logprobs
from training.rl.ppo_math import (
    explained_variance,
    gae,
    group_advantages,
    kl_penalty_rewards,
    loss_count,
    masked_entropy,
    masked_whiten,
    policy_loss,
    token_weights,
    value_loss,
)
from training.rl.scorers import Scorer, reward_model_scorer, rubric_scorer
from training.rl.watch import collapse, flag_overoptimization, warn_collapse

STATE_FILE = "ppo_state.json"
VALUE_HEAD_FILE = "value_head.pt"
OPTIMIZER_FILE = "optimizer.pt"
EPISODE_METRICS = ("success", "utility", "steps", "tool_errors", "loop", "truncated", "agent_tokens")
# A minibatch's figures, each a sum of the processes' parts in a data-parallel run.
MINIBATCH_FIGURES = (
    "loss/policy",
    "loss/value",
    "loss/total",
    "policy/entropy",
    "policy/clipfrac",
    "policy/approx_kl",
    "value/clipfrac",
)


@dataclass
class RLResult:
    iterations: int  # iterations done, counting those before a resume
    stop_reason: str  # "finished", "kl_budget", "collapse", "time_limit", "cancelled" or "diverged"
    message: str  # one sentence saying why it stopped
    best: dict | None  # {"iteration", "path", "dev"} of the best checkpoint by dev rubric
    last_checkpoint: str | None
    evaluations: list[dict] = field(default_factory=list)  # [{"iteration", "rm_score", "dev": {...}}]
    seconds: float = 0.0

    @property
    def cancelled(self) -> bool:
        return self.stop_reason == "cancelled"

    @property
    def diverged(self) -> bool:
        return self.stop_reason == "diverged"


# --- The loop -----------------------------------------------------------------------------


def train_rl(
    *,
    policy_dir: str | Path,
    scorer: Scorer,
    train_tasks: list | Callable[[int], list],
    dev_tasks: list,
    runner,
    config: RLConfig,
    out_dir: str | Path,
    reference_dir: str | Path | None = None,
    callbacks: RLCallbacks | None = None,
    resume_from: str | Path | None = None,
    device: str = "cpu",
    dev_runner=None,
) -> RLResult:
    """Fine-tune the policy in `policy_dir` with PPO (or RLOO, GRPO); checkpoints go under `out_dir`.

    `runner` plays the environment's episodes (training/envs/base.py EpisodeRunner, or a function
    giving each task its runner); `dev_runner` plays the dev tasks' (the same runner unless the
    dev tasks are of another world). `train_tasks` is a list, or a function giving iteration i's
    tasks (training/envs/worlds.py WorldStream.tasks: a fresh world every iteration).
    `scorer(episodes)` returns one score per finished episode (higher is better).
    `reference_dir` is the frozen policy of the KL penalty (the starting policy unless given).
    Inside the processes of a data-parallel run each plays its share (core/ranks.py);
    the first writes the checkpoints.

    The loop, one iteration a pass (the module docstring tells each step):
    rollout, score, advantages, update, log; then evaluate and save when due.
    """
    run = PPORun(
        policy_dir=policy_dir,
        scorer=scorer,
        train_tasks=train_tasks,
        dev_tasks=dev_tasks,
        runner=runner,
        dev_runner=dev_runner or runner,
        config=config,
        out_dir=Path(out_dir),
        reference_dir=reference_dir,
        callbacks=callbacks or RLCallbacks(),
        resume_from=resume_from,
        device=device,
    )
    if run.iteration == 0 and config.eval_every and not resume_from:
        if ended := run.judge_and_save(0, rm_score=None):  # the start, the figure every later one is compared to
            return ended
    while run.iteration < config.iterations:
        if ended := run.stop_before_iteration():
            return ended
        iteration = run.iteration + 1
        episodes, mine = run.rollout(iteration)  # 1. play this process's share of the batch
        raw, scores, shaping = run.score(episodes, mine)  # 2. one score per episode
        targets = run.advantages(episodes, scores)  # 3-4. old log-probs, values, KL rewards, advantages
        stats, diverged = run.update(iteration, targets, mine)  # 5. epochs of clipped minibatch steps
        if diverged:
            return run.diverged(diverged)
        run.iteration = iteration
        figures = run.log(iteration, episodes, mine, targets, raw, scores, shaping, stats)  # 6. metrics
        if ended := run.after_iteration(iteration, figures):  # cancel, evaluation, checkpoint, KL budget
            return ended
    return run.end()


@dataclass
class Targets:
    """What one iteration's update learns from: this process's episodes as tensors, and the
    old log-probs, values, advantages and returns at their agent tokens."""

    batch: EpisodeBatch
    old_logprobs: object
    old_values: object
    advantages: object
    returns: object
    kl: object  # (rows, A) per-token KL to the reference


class PPORun(CheckpointedRun):
    """The moving parts of one RL run, each step of `train_rl`'s loop a method: the policy,
    its value head and optimizer, the frozen reference, the state a resume reads back
    (iteration, score scale, evaluations, best checkpoint), and this process's place among
    the processes of a data-parallel run (core/ranks.py)."""

    def __init__(
        self,
        *,
        policy_dir,
        scorer,
        train_tasks,
        dev_tasks,
        runner,
        dev_runner,
        config: RLConfig,
        out_dir: Path,
        reference_dir,
        callbacks: RLCallbacks,
        resume_from,
        device: str,
    ):
        super().__init__(
            policy_dir=policy_dir, config=config, out=out_dir, callbacks=callbacks, total=config.iterations
        )
        self.scorer, self.train_tasks, self.dev_tasks = scorer, train_tasks, dev_tasks
        self.runner, self.dev_runner, self.device = runner, dev_runner, device
        self.out.mkdir(parents=True, exist_ok=True)
        self.times: dict[str, float] = {}  # this iteration's seconds by step
        self.timer = self.started  # when the update's part of the iteration began (`advantages`)
        if config.threads:
            torch.set_num_threads(config.threads)

        start_dir = Path(resume_from) if resume_from else self.policy_dir
        self.model, self.tokenizer = load_policy(start_dir, device=device)
        self.reference, _ = load_policy(reference_dir or policy_dir, device=device)
        self.reference.requires_grad_(False)
        self.chat = ChatFormat.for_policy(self.tokenizer, policy_dir)
        self.value_head = torch.nn.Linear(self.model.get_output_embeddings().in_features, 1).to(device)
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)
        self.trained = list(self.model.parameters()) + list(self.value_head.parameters())
        self.optimizer = torch.optim.AdamW(self.trained, lr=config.learning_rate, eps=1e-5, weight_decay=0.0)
        self.state.update(score_mean=None, score_std=None, grad_norms=[], score_std_first=None)
        if resume_from:
            self.resume(start_dir)
        self.rollout_config = RolloutConfig(
            temperature=config.temperature,
            batch_size=config.rollout_batch_size,
            max_action_tokens=config.max_action_tokens,
            max_context=config.max_context,
        )
        self.group = config.group_size if config.algorithm != "ppo" else 1
        self.task_rng = random.Random(config.seed)
        for done in range(self.state["iteration"]):  # the same task order after a resume
            self.task_rng.sample(range(len(self._pool(done + 1))), config.episodes_per_iteration // self.group)

    def resume(self, start_dir: Path) -> None:
        super().resume(start_dir)
        self.value_head.load_state_dict(torch.load(start_dir / VALUE_HEAD_FILE, map_location=self.device))
        if (start_dir / OPTIMIZER_FILE).exists():
            self.optimizer.load_state_dict(torch.load(start_dir / OPTIMIZER_FILE, map_location=self.device))
        else:
            self.callbacks.log(f"{start_dir} has no optimizer state; the optimizer starts afresh.")

    unit, state_file, config_file = "iteration", STATE_FILE, "rl_config.json"
    latest_only = (OPTIMIZER_FILE,)  # only the latest checkpoint resumes

    def folder(self, step: int) -> str:
        return f"iter-{step:04d}"

    @property
    def iteration(self) -> int:
        return self.state["iteration"]

    @iteration.setter
    def iteration(self, value: int) -> None:
        self.state["iteration"] = value

    def _pool(self, iteration: int) -> list:
        return self.train_tasks(iteration) if callable(self.train_tasks) else self.train_tasks

    # 1. Rollout.

    def phase(self, iteration: int, what: str) -> None:
        """Say which step of which iteration begins, at the progress of the iterations done."""
        self.callbacks.progress(
            (iteration - 1) / self.config.iterations, f"Iteration {iteration} of {self.config.iterations}: {what} ..."
        )

    def rollout(self, iteration: int) -> tuple[list, list[int]]:
        """This process's episodes of the iteration's batch, and their indices in the batch."""
        timer = time.monotonic()
        config = self.config
        self.phase(iteration, f"playing {config.episodes_per_iteration} episodes")
        self.model.eval()
        available = self._pool(iteration)
        picks = self.task_rng.sample(range(len(available)), config.episodes_per_iteration // self.group)
        tasks = [available[i] for i in picks for _ in range(self.group)]  # rloo and grpo: `group` samples per task
        seeds = [config.seed * 1_000_003 + iteration * 10_007 + i for i in range(len(tasks))]
        mine = self.ranks.mine(len(tasks), self.group)  # this process's episodes of the batch (all in one)
        episodes = rollout(
            self.model,
            self.tokenizer,
            self.runner,
            [tasks[i] for i in mine],
            self.rollout_config,
            seeds=[seeds[i] for i in mine],
            chat=self.chat,
        )
        self.times["time/rollout"] = time.monotonic() - timer
        return episodes, mine

    # 2. Score.

    def score(self, episodes: list, mine: list[int]):
        """(raw scores, the scores the update uses, the shaping penalties), one per episode."""
        timer = time.monotonic()
        config, state = self.config, self.state
        raw = torch.tensor(self.scorer(episodes), dtype=torch.float32)
        if state["score_mean"] is None:
            batch_raw = torch.tensor(self.ranks.gather(raw.tolist(), mine))
            spread = float(batch_raw.std()) if len(batch_raw) > 1 else 0.0
            # A first batch whose scores are all equal (every episode wrong, say) gives no scale: keep 1.
            state["score_mean"], state["score_std"] = float(batch_raw.mean()), spread if spread > 1e-6 else 1.0
        scores = (raw - state["score_mean"]) / state["score_std"] if config.normalize_scores else raw.clone()
        shaping = torch.tensor(
            [
                config.invalid_action_penalty * invalid_actions(e)
                + config.tool_error_penalty * e.episode.record.tool_errors
                for e in episodes
            ]
        )
        self.times["time/score"] = time.monotonic() - timer
        return raw, scores - shaping, shaping

    # 3-4. Old log-probs, values and reference log-probs; rewards, advantages, returns.

    def advantages(self, episodes: list, scores) -> Targets:
        self.timer = time.monotonic()  # the update's time counts from here
        config = self.config
        batch = episode_batch(episodes, self.tokenizer.pad_token_id, self.device)
        with torch.no_grad():
            old_logprobs, old_values, ref_logprobs = [], [], []
            for index in _minibatches(len(episodes), config.minibatch_size, None):
                part = batch.rows(index)
                logits, values = forward_agent_tokens(self.model, self.value_head, part, config.temperature)
                old_logprobs.append(token_logprobs(logits, part.tokens))
                old_values.append(values)
                ref_logits, _ = forward_agent_tokens(self.reference, None, part, config.temperature)
                ref_logprobs.append(token_logprobs(ref_logits, part.tokens))
            old_logprobs, old_values = torch.cat(old_logprobs) * batch.mask, torch.cat(old_values) * batch.mask
            ref_logprobs = torch.cat(ref_logprobs) * batch.mask
            rewards, kl = kl_penalty_rewards(
                scores.to(self.device), old_logprobs, ref_logprobs, batch.mask, config.kl_coef
            )
            if config.algorithm == "ppo":
                advantages, returns = gae(rewards, old_values, batch.mask, gamma=config.gamma, lam=config.lam)
                advantages = masked_whiten(advantages, batch.mask, total=self.ranks.total)
            else:  # one return per episode (score and KL penalty), compared within its task's group
                episode_returns = (rewards * batch.mask).sum(1)
                advantages = group_advantages(episode_returns, self.group, mode=config.algorithm)[:, None] * batch.mask
                returns = old_values
        return Targets(batch, old_logprobs, old_values, advantages, returns, kl)

    # 5. Epochs of minibatch updates.

    def update(self, iteration: int, targets: Targets, mine: list[int]) -> tuple[dict[str, list[float]], str | None]:
        """Epochs of shuffled minibatches of the whole batch, each process computing its rows'
        part of the minibatch's mean (core/ranks.py). Returns the steps' figures, and why
        training diverged if it did."""
        config = self.config
        self.phase(iteration, f"updating the policy ({config.epochs} epochs)")
        self.model.train()
        stats: dict[str, list[float]] = {}
        rows_here = {index: row for row, index in enumerate(mine)}
        for epoch in range(config.epochs):
            for order in _minibatches(
                config.episodes_per_iteration // self.group * self.group,
                config.minibatch_size,
                torch.Generator().manual_seed(config.seed * 7919 + iteration * 31 + epoch),
            ):
                index = self.ranks.local(order, rows_here)
                loss, parts = self._minibatch_loss(iteration, targets, index)
                if not self.ranks.all_true(loss is None or bool(torch.isfinite(loss))):
                    return stats, f"a non-finite loss at iteration {iteration}, epoch {epoch + 1}"
                self.optimizer.zero_grad(set_to_none=True)
                if loss is not None:
                    loss.backward()
                self.ranks.sum_gradients(self.trained)
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.trained, config.grad_clip))
                if not math.isfinite(grad_norm):
                    return stats, f"a non-finite gradient at iteration {iteration}, epoch {epoch + 1}"
                self.optimizer.step()
                summed = self.ranks.total(torch.tensor([parts[k] for k in MINIBATCH_FIGURES], dtype=torch.float64))
                for key, value in [*zip(MINIBATCH_FIGURES, summed.tolist()), ("policy/grad_norm", grad_norm)]:
                    stats.setdefault(key, []).append(value)
                if self.callbacks.should_stop():
                    return stats, None
        return stats, None

    def _minibatch_loss(self, iteration: int, targets: Targets, index):
        """(loss, its parts) of this process's rows `index` of a minibatch; (None, zeros) when
        none of the minibatch is here (this process then adds zeros to the sums)."""
        config = self.config
        part = targets.batch.rows(index)
        count = self.ranks.total(loss_count(part.mask, config.loss_aggregation))  # the whole minibatch's
        weight = token_weights(part.mask, config.loss_aggregation)
        if not len(index):
            return None, dict.fromkeys(MINIBATCH_FIGURES, 0.0)
        warming = config.algorithm == "ppo" and iteration <= config.value_warmup
        logits, values = forward_agent_tokens(
            self.model, self.value_head, part, config.temperature, detach_values=warming
        )
        logprobs = token_logprobs(logits, part.tokens)
        pg_loss, pg_stats = policy_loss(
            logprobs,
            targets.old_logprobs[index],
            targets.advantages[index],
            part.mask,
            clip=config.clip_range,
            count=count,
            weight=weight,
        )
        vf_loss, vf_stats = value_loss(
            values,
            targets.old_values[index],
            targets.returns[index],
            part.mask,
            clip=config.value_clip_range,
            count=count,
            weight=weight,
        )
        entropy = masked_entropy(logits, part.mask, count=count, weight=weight)
        vf_coef = config.vf_coef if config.algorithm == "ppo" else 0.0  # no critic in rloo and grpo
        if warming:  # only the value head learns: the policy does not move before its critic does
            loss = vf_loss.clone()
        else:
            loss = pg_loss + vf_coef * vf_loss - config.entropy_coef * entropy
        parts = {
            "loss/policy": pg_loss.item(),
            "loss/value": vf_loss.item(),
            "loss/total": loss.item(),
            "policy/entropy": entropy.item(),
            **pg_stats,
            **vf_stats,
        }
        return loss, parts

    def diverged(self, why: str) -> RLResult:
        where = f"the last good checkpoint, {self.last_checkpoint}," if self.last_checkpoint else "no checkpoint"
        return self.finish(
            "diverged",
            f"Training diverged: {why}; it stopped and {where} is kept. Try a lower learning_rate or a smaller kl_coef.",
        )

    # 6. Metrics.

    def log(self, iteration, episodes, mine, targets: Targets, raw, scores, shaping, stats) -> dict:
        """The iteration's figures, over the whole batch, reported to the callbacks."""
        config, ranks, state, batch = self.config, self.ranks, self.state, targets.batch
        self.times["time/update"] = time.monotonic() - self.timer
        rows = ranks.gather(
            [
                {"raw": float(r), "score": float(s), "kl": float(k), "shaping": float(h)}
                for r, s, k, h in zip(raw, scores, targets.kl.sum(1), shaping)
            ],
            mine,
        )
        batch_figures = mean_of_figures(rows)
        episode_means = mean_of_figures(ranks.gather([episode_figures(e) for e in episodes], mine))
        if iteration == 1 and state["evaluations"] and state["evaluations"][0]["rm_score"] is None:
            state["evaluations"][0]["rm_score"] = batch_figures["raw"]  # the starting policy's episodes
        entropy = ranks.total((-targets.old_logprobs * batch.mask).sum()) / ranks.total(batch.mask.sum()).clamp(min=1)
        figures = {
            "objective/rm_score": batch_figures["raw"],
            "objective/score": batch_figures["score"],
            "objective/score_std": float(torch.tensor([row["raw"] for row in rows]).std()),
            "objective/kl": batch_figures["kl"],
            "objective/kl_median": statistics.median(row["kl"] for row in rows),
            "objective/kl_penalty": -config.kl_coef * batch_figures["kl"],
            "objective/entropy": float(entropy),
            "objective/shaping": -batch_figures["shaping"],
            **{f"episode/{name}": value for name, value in episode_means.items() if name in EPISODE_METRICS},
            **self.times,
            **{key: sum(values) / len(values) for key, values in stats.items()},
        }
        if config.algorithm == "ppo":  # rloo and grpo have no critic to explain anything
            figures["value/explained_variance"] = explained_variance(
                targets.old_values, targets.returns, batch.mask, total=ranks.total
            )
        self.callbacks.metrics(iteration, figures)
        state["last_rm_score"] = figures["objective/rm_score"]
        warn_collapse(state, figures, iteration, self.callbacks)
        self.callbacks.progress(iteration / config.iterations, f"iteration {iteration} of {config.iterations}")
        return figures

    # Between iterations: stop, evaluate, save.

    def stop_before_iteration(self) -> RLResult | None:
        """The result, when the run must not start another iteration (cancel, time limit)."""
        iteration = self.iteration
        if self.callbacks.should_stop():
            return self.finish("cancelled", f"Cancelled after iteration {iteration}.")
        if self.config.max_seconds and self.ranks.latest(time.monotonic() - self.started) > self.config.max_seconds:
            if ended := self.save_last():
                return ended
            return self.finish("time_limit", f"Stopped at the time limit after iteration {iteration}.")
        return None

    def after_iteration(self, iteration: int, figures: dict) -> RLResult | None:
        """Cancel, the dev evaluation and checkpoint when due, collapse and the KL budget."""
        config = self.config
        if self.callbacks.should_stop():
            return self.finish("cancelled", f"Cancelled during iteration {iteration}.")
        # The median episode, not the mean: one sample that derails into hundreds of garbage
        # tokens carries a KL sum that would stop a run whose other episodes barely moved.
        over_budget = config.kl_budget and figures["objective/kl_median"] > config.kl_budget
        due = config.eval_every and (
            iteration % config.eval_every == 0 or iteration == config.iterations or over_budget
        )
        if due or over_budget or (config.checkpoint_every and iteration % config.checkpoint_every == 0):
            try:
                entry = self.judge(iteration, rm_score=figures["objective/rm_score"]) if due else None
            except EvaluationCancelled:
                return self.finish("cancelled", f"Cancelled while iteration {iteration} was being judged on dev.")
            fell = entry and collapse(self.state, entry, config)
            self.save(iteration, entry)
            if fell:
                return self.finish("collapse", fell)
        if over_budget:
            return self.finish(
                "kl_budget",
                f"Stopped after iteration {iteration}: the KL to the reference policy, "
                f"{figures['objective/kl_median']:.2f} nats in the median episode (mean "
                f"{figures['objective/kl']:.2f}), passed the budget of {config.kl_budget:g}.",
            )
        return None

    def save_last(self) -> RLResult | None:
        """The current iteration judged (when the run judges on dev) and saved, unless it just
        was; the run's end when a cancel came while it was being judged, else None."""
        iteration = self.iteration
        if self.saved(iteration):
            return None
        return self.judge_and_save(
            iteration, judged=bool(self.config.eval_every), rm_score=self.state.get("last_rm_score")
        )

    def end(self) -> RLResult:
        """The last iteration judged and saved (unless it just was), and the result."""
        iteration = self.iteration
        if ended := self.save_last():
            return ended
        return self.finish("finished", f"Finished {iteration} iterations in {time.monotonic() - self.started:.0f} s.")

    def checkpoint_tensors(self) -> dict:
        return {VALUE_HEAD_FILE: self.value_head.state_dict(), OPTIMIZER_FILE: self.optimizer.state_dict()}

    def watch(self, entry: dict) -> None:
        flag_overoptimization(self.state, entry, self.config, self.callbacks)

    def finish(self, reason: str, message: str) -> RLResult:
        end = self.run_end(reason, message)
        return RLResult(iterations=end.steps, **{k: v for k, v in asdict(end).items() if k != "steps"})


def _minibatches(n: int, size: int, generator):
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    return [order[i : i + size] for i in range(0, n, size)]


def invalid_actions(episode) -> int:
    """Turns that were no tool call at all (recorded as the tool "invalid"), for the optional shaping term."""
    return sum(1 for step in episode.steps if step.get("kind") == "action" and step.get("tool") == INVALID_TOOL)


# --- Data-parallel processes (each runs training/rl/rl_rank.py) ---------------------------


def train_rl_in_processes(
    *,
    inputs: str,
    arguments: dict,
    policy_dir: str | Path,
    config: RLConfig,
    out_dir: str | Path,
    callbacks: RLCallbacks,
    reference_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    device: str = "cpu",
) -> RLResult:
    """`train_rl` in `config.processes` processes on this machine; returns the first one's result."""
    out = Path(out_dir)
    spec = {
        "inputs": inputs,
        "arguments": arguments,
        "policy_dir": str(policy_dir),
        "reference_dir": str(reference_dir) if reference_dir else None,
        "config": asdict(config),
        "out_dir": str(out),
        "resume_from": str(resume_from) if resume_from else None,
        "device": device,
    }
    callbacks.log(f"playing and training in {config.processes} data-parallel processes")
    result = parallel.launch(
        "training.rl.rl_rank",
        spec,
        out / "parallel",
        processes=config.processes,
        on_event=parallel.calling(callbacks),
        should_stop=callbacks.should_stop,
    )
    return RLResult(**result)


def build_inputs(inputs: str, arguments: dict) -> dict:
    """Call the "module:function" that builds a process's scorer, tasks and runners."""
    module, _, name = inputs.partition(":")
    return getattr(importlib.import_module(module), name)(**arguments)


# --- Command line -------------------------------------------------------------------------


def cli_inputs(
    environment: str, reward: str, dev_tasks: int = 0, train_split: str = "train", fresh_worlds: bool = False
) -> dict:
    """The command line's and the benchmarks' scorer, tasks and runners, built in each process
    of a parallel run: the dev tasks are the ones the app's runs are judged on
    (training/rl/dev.py), `dev_tasks` of them (0: all). `fresh_worlds`: each iteration's tasks
    from a world of its own (training/envs/worlds.py) instead of the environment's split."""
    env = get_environment(environment)
    dev_env, judged_on = dev_world(environment, "", dev_tasks, get=get_environment)
    scorer = (
        rubric_scorer(utility=reward == "utility") if reward in ("rubric", "utility") else reward_model_scorer(reward)
    )
    stream = WorldStream(lambda seed: get_environment(environment, seed=seed)) if fresh_worlds else None
    return {
        "scorer": scorer,
        "train_tasks": stream.tasks if stream else env.tasks(train_split),
        "runner": stream.runner if stream else EpisodeRunner(env),
        "dev_tasks": judged_on,
        "dev_runner": EpisodeRunner(dev_env),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Multi-turn PPO of a policy in an environment.")
    parser.add_argument("--policy", required=True, help="policy directory to start from")
    parser.add_argument(
        "--environment", default="encyclopedia", help="a built-in, an entry point or package.module:Class"
    )
    parser.add_argument("--reward", default="rubric", help="'rubric', 'utility' or a reward-model directory")
    parser.add_argument("--out", default="var/ppo-cli")
    parser.add_argument(
        "--fresh-worlds", action="store_true", help="each iteration's tasks from a newly generated world"
    )
    add_config_arguments(parser, RLConfig)
    args = parser.parse_args(argv)
    try:
        config = config_from_arguments(RLConfig, args)
    except ValueError as exc:
        parser.error(" ".join(str(exc).splitlines()))
    callbacks = RLCallbacks(
        log=print, metrics=lambda i, m: print(i, json.dumps({k: round(v, 4) for k, v in m.items()}))
    )
    arguments = {
        "environment": args.environment,
        "reward": args.reward,
        "dev_tasks": config.dev_tasks,
        "fresh_worlds": args.fresh_worlds,
    }
    if config.processes > 1:
        result = train_rl_in_processes(
            inputs="training.rl.trainer:cli_inputs",
            arguments=arguments,
            policy_dir=args.policy,
            config=config,
            out_dir=args.out,
            callbacks=callbacks,
        )
    else:
        built = cli_inputs(**arguments)
        result = train_rl(policy_dir=args.policy, config=config, out_dir=args.out, callbacks=callbacks, **built)
    print(result.message, "best:", result.best and (result.best["iteration"], result.best["dev"]["success"]))


if __name__ == "__main__":
    main()
