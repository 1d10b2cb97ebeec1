"""Expert iteration (best-of-n distillation): sample, keep the favourite, fine-tune on it, repeat.

One round, top to bottom:

1. sample: `samples` episodes at `temperature` on each of `tasks_per_round` training tasks,
   from a world no stage has seen when the caller gives a stream (training/envs/worlds.py:
   every round its own world, so memorising names cannot pay and only reading can);
2. select: per task the favourite of its samples, by the rubric (`rubric`: a correct one,
   the fewest steps first: the ceiling; a task with none keeps nothing), by a reward model
   (`reward_model`: the highest score), or by the answer most samples gave and then the
   reward model (`majority`); of the reward model's favourites only the `keep_top` share it
   scores highest;
3. fine-tune on the kept episodes' **sampled token ids** (never re-rendered text: 14% of
   sampled episodes do not re-tokenize to the ids that were sampled), mixed with `anchor`
   examples (the policy's behaviour-cloning data, `anchor_mix` per kept episode) against
   forgetting, by the behaviour-cloning loss (training/policy/bc.py);
4. judge the round's policy on the dev tasks (a fresh world), checkpoint, and keep the best
   round by dev success, which replaces the best only on signal (as RL's checkpoints).

ReST (Gulcehre et al. 2023), RAFT (Dong et al. 2023) and WebGPT's best-of-n are the model;
Llama 2 used rejection sampling before PPO. Plain Python and torch, no Django.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from core.callbacks import RLCallbacks
from core.configs import add_config_arguments, config_from_arguments
from training.envs.base import EpisodeRunner
from training.envs.registry import get_environment
from training.envs.worlds import WorldStream
from training.policy.bc import demonstrations, play_demonstrations, train_bc
from training.policy.bc_config import BCConfig
from training.policy.chat import ChatFormat
from training.policy.model_io import load_policy
from training.policy.rollout import RolloutConfig, rollout
from training.rl.checkpointed_run import CheckpointedRun
from training.rl.config import ExpertIterationConfig
from training.rl.dev import dev_world
from training.rl.scorers import reward_model_scorer

STATE_FILE = "expert_iteration_state.json"


def favourites(episodes: list, samples: int, selection: str, scores: list[float] | None, keep_top: float = 1.0) -> list:
    """The kept episode of each task's consecutive `samples` episodes. By the rubric, a right one
    (none for a task with none); by the reward model (after the majority answer for
    `majority`), the highest scored, and of those only the `keep_top` share scored highest.
    `scores` are the reward model's, one per episode."""
    kept, kept_scores = [], []
    for start in range(0, len(episodes), samples):
        group = list(range(start, min(start + samples, len(episodes))))
        if selection == "rubric":
            right = [i for i in group if episodes[i].outcome.correct]
            if right:
                kept.append(episodes[min(right, key=lambda i: (episodes[i].outcome.parts.get("steps", 0), i))])
            continue
        if selection == "majority":
            answers = Counter(_answer(episodes[i]) for i in group if _answer(episodes[i]))
            if answers:
                top = answers.most_common(1)[0][0]
                group = [i for i in group if _answer(episodes[i]) == top]
        best = max(group, key=lambda i: (scores[i], -i))
        kept.append(episodes[best])
        kept_scores.append(scores[best])
    if selection != "rubric" and keep_top < 1 and kept:
        order = sorted(range(len(kept)), key=lambda i: -kept_scores[i])[: max(1, round(keep_top * len(kept)))]
        kept = [kept[i] for i in sorted(order)]
    return kept


def _answer(episode) -> str:
    return " ".join((episode.episode.record.answer or "").lower().split())


@dataclass
class ExpertIterationResult:
    rounds: int
    stop_reason: str  # "finished" or "cancelled"
    message: str
    best: dict | None  # {"round", "path", "dev"}
    last_checkpoint: str | None
    evaluations: list[dict] = field(default_factory=list)  # [{"round", "dev", "kept", "tasks", "world"}]
    seconds: float = 0.0


def expert_iteration(
    *,
    policy_dir: str | Path,
    tasks_for_round: Callable[[int], list],
    runner,
    dev_tasks: list,
    dev_runner,
    config: ExpertIterationConfig,
    out_dir: str | Path,
    scorer=None,
    anchor: list[tuple[list[int], list[int]]] | None = None,
    callbacks: RLCallbacks | None = None,
    resume_from: str | Path | None = None,
) -> ExpertIterationResult:
    """Run the rounds from the policy in `policy_dir`; checkpoints go under `out_dir`/checkpoints.

    `tasks_for_round(r)` gives round r's candidate tasks (r from 1; a WorldStream's `tasks` for a
    fresh world each round); `runner` plays them (an EpisodeRunner or a function of the task).
    `scorer(episodes)` is needed for the reward-model selections. `anchor` are (ids, agent
    mask) examples of the policy's behaviour cloning."""
    rounds = _Rounds(
        policy_dir=Path(policy_dir),
        runner=runner,
        dev_tasks=dev_tasks,
        dev_runner=dev_runner,
        config=config,
        out=Path(out_dir),
        scorer=scorer,
        anchor=anchor,
        callbacks=callbacks or RLCallbacks(),
        resume_from=resume_from,
    )
    if not resume_from and (ended := rounds.judge_and_save(0, kept=0, tasks=0)):
        return ended
    for round_ in range(rounds.state["round"] + 1, config.rounds + 1):
        if rounds.callbacks.should_stop():
            return rounds.finish("cancelled", f"Cancelled after round {round_ - 1}.")
        tasks, episodes, round_rng = rounds.sample(round_, tasks_for_round(round_))  # 1. sample
        kept = favourites(  # 2. select
            episodes,
            config.samples,
            config.selection,
            scorer(episodes) if config.selection != "rubric" else None,
            config.keep_top,
        )
        steps, anchors = rounds.fine_tune(round_, kept, round_rng)  # 3. fine-tune on the sampled ids, with anchors
        if rounds.callbacks.should_stop():  # a round cut short is no round: the last whole one stays
            return rounds.finish(
                "cancelled", f"Cancelled during round {round_}; round {round_ - 1} is the last one kept."
            )
        world = rounds.report(round_, tasks, episodes, kept, steps, anchors)
        if ended := rounds.judge_and_save(round_, kept=len(kept), tasks=len(tasks), world=world):  # 4. judge, keep
            return ended
        rounds.callbacks.progress(round_ / config.rounds, f"round {round_} of {config.rounds}")
    return rounds.finish("finished", f"Finished {config.rounds} rounds in {time.monotonic() - rounds.started:.0f} s.")


class _Rounds(CheckpointedRun):
    """The moving parts of an expert-iteration run, each step of `expert_iteration`'s loop a
    method: the policy, the draws of tasks; the state, dev judging and checkpoints are the
    skeleton's (training/rl/checkpointed_run.py)."""

    unit, state_file, config_file = "round", STATE_FILE, "expert_iteration_config.json"

    def __init__(
        self, *, policy_dir, runner, dev_tasks, dev_runner, config, out, scorer, anchor, callbacks, resume_from
    ):
        super().__init__(policy_dir=policy_dir, config=config, out=out, callbacks=callbacks, total=config.rounds)
        self.runner, self.dev_tasks, self.dev_runner = runner, dev_tasks, dev_runner
        self.scorer, self.anchor = scorer, anchor
        torch.set_num_threads(max(1, config.threads))
        start_dir = Path(resume_from) if resume_from else policy_dir
        self.model, self.tokenizer = load_policy(start_dir)
        self.chat = ChatFormat.for_policy(self.tokenizer, policy_dir)
        if resume_from:
            self.resume(start_dir)
        self.rng = random.Random(config.seed)
        for _ in range(self.state["round"]):  # the same draws after a resume
            self.rng.random()

    def sample(self, round_: int, candidates: list) -> tuple[list, list, random.Random]:
        """The round's tasks, `samples` episodes of each, and the round's own random draws."""
        config = self.config
        round_rng = random.Random(self.rng.random())
        tasks = round_rng.sample(candidates, min(config.tasks_per_round, len(candidates)))
        repeated = [t for t in tasks for _ in range(config.samples)]
        self.model.eval()
        episodes = rollout(
            self.model,
            self.tokenizer,
            self.runner,
            repeated,
            RolloutConfig(
                temperature=config.temperature,
                batch_size=config.rollout_batch_size,
                max_action_tokens=config.max_action_tokens,
                max_context=config.max_context,
                threads=config.threads,
            ),
            seeds=[config.seed * 1_000_003 + round_ * 100_003 + i for i in range(len(repeated))],
            chat=self.chat,
        )
        self.callbacks.progress((round_ - 0.6) / config.rounds, f"round {round_}: sampled {len(episodes)} episodes")
        return tasks, episodes, round_rng

    def fine_tune(self, round_: int, kept: list, round_rng: random.Random) -> tuple[int, int]:
        """The behaviour-cloning loss on the kept episodes' sampled ids and the anchors drawn
        for them; returns (steps, anchors)."""
        config = self.config
        examples = [(list(e.ids), list(e.agent_mask)) for e in kept]
        if self.anchor and config.anchor_mix:
            examples += round_rng.sample(self.anchor, min(len(self.anchor), round(config.anchor_mix * len(kept))))
        steps = max(1, round(config.epochs * len(examples) / config.batch_size)) if kept else 0
        if steps:
            train_bc(
                self.model,
                self.tokenizer,
                examples,
                BCConfig(
                    learning_rate=config.learning_rate,
                    warmup_steps=min(10, steps),
                    max_steps=steps,
                    batch_size=config.batch_size,
                    observation_loss_weight=config.observation_loss_weight,
                    first_action_weight=1.0,
                    budget_seconds=0,
                    threads=config.threads,
                    seed=config.seed + round_,
                ),
                should_stop=self.callbacks.should_stop,
            )
        return steps, len(examples) - len(kept)

    def report(self, round_: int, tasks: list, episodes: list, kept: list, steps: int, anchors: int):
        """The round's figures to the callbacks; returns the seed of the world it sampled in."""
        runner = self.runner(tasks[0]) if callable(self.runner) else self.runner
        world = getattr(getattr(runner, "env", None), "seed", None)
        sampled_success = sum(e.outcome.correct for e in episodes) / max(1, len(episodes))
        kept_right = sum(e.outcome.correct for e in kept) / max(1, len(kept))
        self.callbacks.metrics(
            round_,
            {
                "round/sampled_success": sampled_success,
                "round/kept": len(kept),
                "round/kept_right": kept_right,
                "round/steps": steps,
            },
        )
        self.callbacks.log(
            f"Round {round_}: {len(tasks)} tasks{f' of world {world}' if world is not None else ''}, "
            f"{sampled_success:.1%} of {len(episodes)} samples right; kept {len(kept)} "
            f"({kept_right:.1%} right), {steps} steps on them and {anchors} anchors."
        )
        return world

    def folder(self, step: int) -> str:
        return f"round-{step:03d}"

    def finish(self, reason: str, message: str) -> ExpertIterationResult:
        end = self.run_end(reason, message)
        return ExpertIterationResult(rounds=end.steps, **{k: v for k, v in asdict(end).items() if k != "steps"})


def cli_inputs(environment: str, selection: str, reward_model: str, fresh_worlds: bool, dev_tasks: int, policy: str):
    """The command line's tasks, runners, scorer and anchors (the environment's demonstrations,
    played and tokenized as the policy's behaviour cloning saw them)."""
    env = get_environment(environment)
    dev_env, dev_tasks_ = dev_world(environment, "", dev_tasks, get=get_environment)
    if fresh_worlds:
        stream = WorldStream(lambda seed: get_environment(environment, seed=seed), stream=1)
        tasks_for_round, runner = stream.tasks, stream.runner
    else:
        tasks_for_round, runner = (lambda _round: env.tasks("train")), EpisodeRunner(env)
    _, tokenizer = load_policy(policy)
    chat = ChatFormat.for_policy(tokenizer, policy)
    bc = BCConfig(environment=environment)
    played = play_demonstrations(env, bc, make_env=lambda seed: get_environment(environment, seed=seed))
    return {
        "tasks_for_round": tasks_for_round,
        "runner": runner,
        "dev_tasks": dev_tasks_,
        "dev_runner": EpisodeRunner(dev_env),
        "scorer": reward_model_scorer(reward_model) if selection != "rubric" else None,
        "anchor": demonstrations(chat, played),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Expert iteration of a policy in an environment.")
    parser.add_argument("--policy", required=True, help="policy directory to start from")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--reward-model", default="", help="reward-model directory (selection reward_model, majority)")
    parser.add_argument("--fresh-worlds", action="store_true", help="each round's tasks from a newly generated world")
    parser.add_argument("--dev-tasks", type=int, default=100)
    parser.add_argument("--out", default="var/expert-iteration-cli")
    add_config_arguments(parser, ExpertIterationConfig)
    args = parser.parse_args(argv)
    try:
        config = config_from_arguments(ExpertIterationConfig, args)
    except ValueError as exc:
        parser.error(" ".join(str(exc).splitlines()))
    if config.selection != "rubric" and not args.reward_model:
        parser.error("--reward-model: needed for selection reward_model or majority.")
    built = cli_inputs(
        args.environment, config.selection, args.reward_model, args.fresh_worlds, args.dev_tasks, args.policy
    )
    callbacks = RLCallbacks(
        log=print, metrics=lambda i, m: print(i, json.dumps({k: round(v, 4) for k, v in m.items()}))
    )
    result = expert_iteration(policy_dir=args.policy, config=config, out_dir=args.out, callbacks=callbacks, **built)
    print(result.message, "best:", result.best and (result.best["round"], result.best["dev"]["success"]))


if __name__ == "__main__":
    main()
