"""Behaviour cloning of the default policy on an environment's scripted demonstrations.

The demonstrations are episodes of the environment's scripted agent (its `demonstrator`),
carried out through the episode runner and tokenized exactly as the policy's own rollouts
are (training/policy/rollout.py), so what it imitates is what it will generate.

The imitation loss is on agent tokens. At a few million parameters the policy must also
learn to copy names out of what it reads, so the observation text gets a language-model
loss too (`observation_loss_weight`); without it a prototype stayed at 1-4% success. The
loss is normalised by the total weight of the tokens in a batch, not per episode, so short
episodes are not over-weighted when batches are bucketed by length.

    python manage.py train_policy        (the Django command wraps this module)
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict

import torch

from core import parallel
from core.ranks import Ranks
from training.envs.base import Environment, EpisodeRunner, demonstrator_problem
from training.envs.mistakes import demonstrator_rates
from training.envs.worlds import stage_stream, stream_seed
from training.policy.bc_config import BCConfig, extra_worlds_problem
from training.policy.checkpoints import write_checkpoint
from training.policy.episodes import RolloutEpisode, episode_tokens, play_scripted
from training.policy.limits import MAX_ACTION_TOKENS
from training.policy.parsers import PARSERS
from training.policy.rollout import RolloutConfig, rollout

# The work folder of a data-parallel run (training/policy/bc_rank.py reads the same names): the
# model as it starts, and the weights rank 0 saves.
INITIAL, TRAINED = "initial", "trained.pt"


class NoDemonstrator(ValueError):
    """The environment has no scripted agent to clone."""


def demonstration_worlds(env: Environment, config: BCConfig, make_env=None) -> list[tuple[Environment, list, int]]:
    """(environment, tasks, episodes per task) of each world demonstrated: the environment's
    training tasks, `demos_per_task` episodes each, then every task of `extra_worlds` other
    worlds of it (built by `make_env(seed)` for seeds 1, 2, ...), one episode each."""
    problem = extra_worlds_problem(config.extra_worlds)
    if problem:
        raise NoDemonstrator(problem)
    worlds = [(env, env.tasks("train"), config.demos_per_task)]
    for seed in range(1, config.extra_worlds + 1):
        if make_env is None:
            raise NoDemonstrator("extra_worlds needs an environment built per seed.")
        world = make_env(seed)
        worlds.append((world, [t for split in ("train", "dev", "eval") for t in world.tasks(split)], 1))
    return worlds


def play_demonstrations(
    env: Environment, config: BCConfig, *, make_env=None, parser: str = "compact", limits=None
) -> list[tuple[EpisodeRunner, RolloutEpisode]]:
    """The scripted agent's episodes in every world demonstrated, each turn written as a policy
    with `parser` writes it."""
    episodes = []
    for index, (world, tasks, repeats) in enumerate(demonstration_worlds(env, config, make_env)):
        problem = demonstrator_problem(world)
        if problem:
            raise NoDemonstrator(problem)
        mistakes, habits = demonstrator_rates(config.demonstrator, config.mistakes)
        turns = world.demonstrator(seed=config.seed + index, mistakes=mistakes, habits=habits)
        runner = EpisodeRunner(world, limits) if limits else EpisodeRunner(world)
        writer = PARSERS[parser](list(runner.tools.values()))
        for task in tasks:
            for _ in range(repeats):
                episode = play_scripted(runner, task, turns, writer)
                if config.demonstrations == "all" or episode.outcome.correct:
                    episodes.append((runner, episode))
    return episodes


def demonstration_texts(played: list[tuple[EpisodeRunner, RolloutEpisode]]) -> list[str]:
    """Text to train the tokenizer on: each world's own texts (an encyclopedia's articles) and
    every message of the demonstrations."""
    texts, seen = [], set()
    for runner, episode in played:
        if id(runner.env) not in seen:
            seen.add(id(runner.env))
            texts += runner.env.vocabulary_texts()
        texts += [m["content"] for m in episode.messages if m["role"] != "system"]
    return texts


def demonstrations(chat, played: list[tuple[EpisodeRunner, RolloutEpisode]]) -> list[tuple[list[int], list[int]]]:
    """(ids, agent_mask) of every demonstration, tokenized as a rollout of the policy would be."""
    tools = {}
    examples = []
    for runner, episode in played:
        key = id(runner)
        if key not in tools:
            tools[key] = [t.as_openai() for t in runner.tools.values()]
        examples.append(episode_tokens(chat, episode, tools[key]))
    return examples


def _batches(examples, batch_size: int, rng: random.Random):
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def batch_loss(
    model,
    examples,
    indices,
    *,
    pad_id: int,
    observation_weight: float,
    first_action_weight: float = 1.0,
    batch_total=None,
) -> tuple[torch.Tensor, dict]:
    """Weighted next-token loss over one batch: agent tokens 1 (the first action's
    `first_action_weight`), environment tokens `observation_weight`. Data-parallel, `indices`
    is this process's share and `batch_total(local weight)` gives the whole batch's weight,
    which normalises the loss as one process would."""
    device = next(model.parameters()).device
    longest = max(len(examples[i][0]) for i in indices)
    ids = torch.full((len(indices), longest), pad_id, dtype=torch.long)
    weights = torch.zeros((len(indices), longest))
    agent = torch.zeros((len(indices), longest))
    attention = torch.zeros((len(indices), longest), dtype=torch.long)
    for row, i in enumerate(indices):
        tokens, mask = examples[i]
        n = len(tokens)
        ids[row, :n] = torch.tensor(tokens)
        attention[row, :n] = 1
        m = torch.tensor(mask, dtype=torch.float)
        weights[row, :n] = m + (1 - m) * observation_weight
        if first_action_weight != 1.0 and 1 in mask:
            begin = mask.index(1)
            end = mask.index(0, begin) if 0 in mask[begin:] else n
            weights[row, begin:end] = first_action_weight
        agent[row, :n] = m
    ids, weights, attention, agent = ids.to(device), weights.to(device), attention.to(device), agent.to(device)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
    targets, w, a = ids[:, 1:], weights[:, 1:], agent[:, 1:]
    token_loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), reduction="none"
    ).view_as(targets)
    total = w.sum() if batch_total is None else batch_total(w.sum().detach())
    loss = (token_loss * w).sum() / total
    with torch.no_grad():
        agent_loss = (token_loss * a).sum() / a.sum().clamp(min=1)
    return loss, {"loss/total": float(loss.detach()), "loss/agent": float(agent_loss)}


class _ThreadChooser:
    """Torch threads for training. On a CPU shared with other busy processes, threads that
    spin waiting on each other make a step several times slower with 2 threads than with 1
    (measured here: 5.3 s against 1.3 s); on an idle machine 2 threads are faster. With
    `threads` 0 it times a few steps with each setting at the start and every
    `every` steps after, and trains with the faster (seconds per token)."""

    def __init__(self, threads: int, *, probe: int = 3, every: int = 100):
        self.original = torch.get_num_threads()
        self.auto = threads == 0 and self.original > 1
        self.options = [self.original, 1] if self.auto else [threads or self.original]
        self.probe, self.every = probe, every
        self.current, self.timings = self.options[0], {}
        torch.set_num_threads(self.current)

    def before(self, step: int) -> None:
        if not self.auto:
            return
        phase = step % self.every
        if phase < self.probe * len(self.options):
            if phase == 0:
                self.timings = {n: [] for n in self.options}
            self.current = self.options[phase // self.probe]
        elif phase == self.probe * len(self.options):
            self.current = min(self.timings, key=lambda n: sorted(self.timings[n])[len(self.timings[n]) // 2])
        torch.set_num_threads(self.current)

    def after(self, seconds_per_token: float) -> None:
        if self.auto and self.current in self.timings and len(self.timings[self.current]) < self.probe:
            self.timings[self.current].append(seconds_per_token)

    def restore(self) -> None:
        torch.set_num_threads(self.original)


def dev_judge(
    env: Environment, config: BCConfig, tokenizer, chat, *, make_env=None, max_action_tokens: int | None = None
):
    """`judge(model)`: the greedy success of a checkpoint on `config.dev_tasks` dev tasks, and
    the world they come from. Where behaviour cloning builds other worlds of the environment,
    the tasks are every split of a world of its own stream (training/envs/worlds.py), which no
    stage trains or evaluates on; otherwise the environment's dev split."""
    if make_env is not None and config.extra_worlds:
        seed = stream_seed(stage_stream("bc_dev", config.seed), 0)
        world = make_env(seed)
        tasks, where = [t for split in ("train", "dev", "eval") for t in world.tasks(split)], f"world {seed}"
    else:
        world, tasks, where = env, env.tasks("dev"), f"{env.name} dev split"
    if len(tasks) > config.dev_tasks:
        tasks = random.Random(config.seed).sample(tasks, config.dev_tasks)
    if not tasks:
        return None, where
    runner = EpisodeRunner(world)
    settings = RolloutConfig(temperature=0.0, max_action_tokens=max_action_tokens or MAX_ACTION_TOKENS)

    def judge(model) -> float:
        episodes = rollout(model, tokenizer, runner, tasks, settings, chat=chat)
        return sum(bool(e.outcome and e.outcome.correct) for e in episodes) / len(episodes)

    return judge, f"{len(tasks)} tasks of {where}"


class _BestCheckpoint:
    """The checkpoint with the best dev score so far (a later one wins a tie: it trained longer)."""

    def __init__(self, model, judge, every: int):
        self.model, self.judge, self.every = model, judge, every
        self.curve: list[tuple[int, float]] = []
        self.best: tuple[float, int, dict] | None = None

    def improving(self, patience: int = 1) -> bool:
        """Whether one of the latest `patience` judged checkpoints beat every one before them."""
        if len(self.curve) <= patience:
            return len(self.curve) >= 2 and self.curve[-1][1] > self.curve[0][1]
        return max(score for _, score in self.curve[-patience:]) > max(score for _, score in self.curve[:-patience])

    def due(self, step: int) -> bool:
        return bool(self.judge and self.every and step % self.every == 0)

    def consider(self, step: int) -> None:
        if not self.judge or (self.curve and self.curve[-1][0] == step):
            return
        self.model.eval()
        with torch.no_grad():
            score = float(self.judge(self.model))
        self.model.train()
        self.curve.append((step, score))
        if self.best is None or score >= self.best[0]:
            self.best = (score, step, {k: v.detach().clone() for k, v in self.model.state_dict().items()})

    def restore(self) -> dict:
        """Load the best checkpoint into the model; the figures of the choice."""
        if self.best is None:
            return {}
        score, step, state = self.best
        self.model.load_state_dict(state)
        return {"dev_curve": self.curve, "kept_step": step, "kept_dev_greedy": score}


def train_bc(
    model, tokenizer, examples, config: BCConfig, *, progress=None, metrics=None, should_stop=None, judge=None
) -> dict:
    """Train in place; returns the final figures. Callbacks: progress(fraction), metrics(step, dict), should_stop(),
    judge(model) -> dev score (`dev_judge`): every `config.dev_every` steps and at the end the
    checkpoint is judged and the best one is what the model holds at the end; while one of the
    last `extend_patience` judged checkpoints beats every earlier one, training goes on at the final learning rate, a
    `dev_every` block at a time, up to `extend_steps` more steps (a policy that learns to read
    late, as the default does near the end of its schedule, finishes learning instead of being
    cut mid-way: where that happens moves with the CPU's arithmetic).

    With `config.processes` > 1 the training runs in that many data-parallel processes
    (core/parallel.py; the rank code is training/policy/bc_rank.py) and the trained
    weights are loaded back into `model`."""
    if config.processes > 1 and not parallel.in_rank():
        return _train_in_processes(model, tokenizer, examples, config, progress, metrics, should_stop)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    model.train()
    trained = [p for p in model.parameters() if p.requires_grad]  # all of them, or a LoRA run's adapters
    optimizer = torch.optim.AdamW(trained, lr=config.learning_rate, weight_decay=0.01, betas=(0.9, 0.95))
    ranks = Ranks()  # the other processes of a data-parallel run (core/ranks.py); alone, the identity

    def lr_at(step: int, elapsed: float) -> float:
        # Cosine over whichever runs out first, the steps or the wall time, so a run cut
        # by `max_seconds` still ends at a low learning rate.
        if step < config.warmup_steps:
            return config.learning_rate * (step + 1) / config.warmup_steps
        done = (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps)
        if config.max_seconds:
            done = max(done, elapsed / config.max_seconds)
        return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, done))))

    start, step, last = time.monotonic(), 0, {}
    first_loss = None
    threads = _ThreadChooser(config.threads)
    best = _BestCheckpoint(model, None if ranks.on else judge, config.dev_every)
    limit = config.max_steps
    try:
        while step < limit:
            for indices in _batches(examples, config.batch_size, rng):
                # Every process stops at the same step, with the same clock.
                elapsed = ranks.latest(time.monotonic() - start)
                stop = ranks.any(bool(should_stop and should_stop()))
                if step >= limit or (config.max_seconds and elapsed > config.max_seconds) or stop:
                    break
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step, elapsed)
                threads.before(step)
                began = time.monotonic()
                loss, figures, share = _share_loss(model, tokenizer, examples, indices, config, ranks)
                if not ranks.all_true(bool(torch.isfinite(loss))):
                    raise FloatingPointError(f"non-finite loss at step {step}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                ranks.sum_gradients(trained)
                figures["policy/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(trained, config.grad_clip))
                optimizer.step()
                threads.after((time.monotonic() - began) / sum(len(examples[i][0]) for i in share))
                step += 1
                first_loss = figures["loss/total"] if first_loss is None else first_loss
                last = figures
                if best.due(step) or (best.judge and step == limit):
                    best.consider(step)
                    figures = {**figures, "dev/greedy_success": best.curve[-1][1]}
                if (
                    step == limit
                    and best.improving(config.extend_patience)
                    and limit < config.max_steps + config.extend_steps
                ):
                    limit += config.dev_every  # still learning at the end: on at the final rate
                if metrics and (step % 10 == 0 or step == 1 or best.due(step)):
                    metrics(step, {**figures, "optim/lr": optimizer.param_groups[0]["lr"]})
                if progress:
                    elapsed = (time.monotonic() - start) / config.max_seconds if config.max_seconds else 0
                    progress(min(1.0, max(step / limit, elapsed)))
            else:
                continue
            break
    finally:
        threads.restore()
    stopped = bool(should_stop and should_stop())
    if not stopped:
        best.consider(step)
    chosen = {} if stopped else best.restore()
    model.eval()
    ranks.barrier()
    return {
        **chosen,
        "steps": step,
        "seconds": round(time.monotonic() - start, 1),
        "first_loss": first_loss,
        "threads": threads.current,
        **last,
        "config": asdict(config),
    }


def _share_loss(model, tokenizer, examples, indices, config: BCConfig, ranks: Ranks):
    """(loss, figures, examples used) of this process's share of a batch: its part of the whole
    batch's mean, so that the processes' gradients, summed, are one process's. A process left
    without an example (a batch smaller than the processes) takes the first with weight 0, so
    it still joins the sums. The figures are the whole batch's (agent loss: the processes' mean)."""
    share = ranks.share(indices)
    keep = 1.0 if share else 0.0
    share = share or indices[:1]
    loss, figures = batch_loss(
        model,
        examples,
        share,
        pad_id=tokenizer.pad_token_id,
        observation_weight=config.observation_loss_weight,
        first_action_weight=config.first_action_weight,
        batch_total=(lambda local: ranks.total(local * keep)) if ranks.on else None,
    )
    if ranks.on:
        loss = loss * keep
        total, agent = ranks.total(torch.tensor([float(loss.detach()), figures["loss/agent"]], dtype=torch.float64))
        figures = {**figures, "loss/total": float(total), "loss/agent": float(agent) / ranks.world}
    return loss, figures, share


def _train_in_processes(model, tokenizer, examples, config: BCConfig, progress, metrics, should_stop) -> dict:
    """`train_bc` in `config.processes` ranks: the model goes to them saved, and comes back trained."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="arbiter-bc-") as folder:
        work = Path(folder)
        write_checkpoint(work / INITIAL, model, tokenizer)
        spec = {
            "config": asdict(config),
            "examples": str(parallel.write_rows(work / "examples.jsonl", examples)),
            "device": str(next(model.parameters()).device),
        }
        hooks = {
            "progress": progress or (lambda fraction: None),
            "metrics": metrics or (lambda step, values: None),
        }
        result = parallel.launch(
            "training.policy.bc_rank",
            spec,
            work,
            processes=config.processes,
            on_event=lambda kind, args: hooks[kind](*args),
            should_stop=should_stop or (lambda: False),
        )
        model.load_state_dict(torch.load(work / TRAINED, map_location=next(model.parameters()).device))
    model.eval()
    return result
