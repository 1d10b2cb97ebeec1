"""Behaviour cloning of the default policy on scripted demonstrations.

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
from dataclasses import asdict, dataclass, field

import torch

from training.env.browser import TextBrowser
from training.env.corpus import Corpus, TaskSpec
from training.env.scripted import Mistakes, ScriptedAgent
from training.policy.layout import episode_tokens, turns_of


@dataclass
class BCConfig:
    """Behaviour cloning settings; every field is saved beside the model."""

    demos_per_task: int = 3  # scripted episodes per training task
    mistakes: Mistakes = field(default_factory=lambda: Mistakes(0.1, 0.1, 0.08, 0.05))  # the demonstrator's error rates
    vocab_size: int = 2048  # BPE vocabulary of the default tokenizer
    hidden: int = 192  # model width (3.0M parameters: learns more within the 5-minute budget than 256)
    layers: int = 6  # transformer blocks
    heads: int = 4  # attention heads
    learning_rate: float = 2e-3  # AdamW peak learning rate
    warmup_steps: int = 30  # linear warm-up, then cosine decay
    batch_size: int = 16  # episodes per optimizer step
    max_steps: int = 900  # optimizer steps (the wall-time limit usually ends training first)
    max_seconds: float = 270.0  # stop past this wall time (0: no limit); the learning rate anneals to it
    observation_loss_weight: float = 0.5  # weight of the language-model loss on environment tokens
    grad_clip: float = 1.0  # gradient norm clip
    seed: int = 0  # data order, demonstrations and initialisation


def demonstrations(corpus: Corpus, tasks: list[TaskSpec], tokenizer, config: BCConfig,
                   browser: TextBrowser | None = None) -> list[tuple[list[int], list[int]]]:
    browser = browser or TextBrowser(corpus)
    agent = ScriptedAgent(corpus, config.mistakes, seed=config.seed)
    examples = []
    for task in tasks:
        for _ in range(config.demos_per_task):
            episode = agent.run(browser, task)
            examples.append(episode_tokens(tokenizer, task.question, turns_of(episode)))
    return examples


def demonstration_texts(corpus: Corpus, tasks: list[TaskSpec], config: BCConfig) -> list[str]:
    """Text to train the tokenizer on: articles, questions and the demonstrations' turns."""
    browser = TextBrowser(corpus)
    agent = ScriptedAgent(corpus, config.mistakes, seed=config.seed)
    texts = [d.text for d in corpus.documents] + [t.question for t in tasks]
    for task in tasks:
        episode = agent.run(browser, task)
        for action, observation in turns_of(episode):
            texts.append(action)
            if observation:
                texts.append(observation)
    return texts


def _batches(examples, batch_size: int, rng: random.Random):
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def batch_loss(model, examples, indices, *, pad_id: int, observation_weight: float) -> tuple[torch.Tensor, dict]:
    """Weighted next-token loss over one batch: agent tokens 1, environment tokens `observation_weight`."""
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
        agent[row, :n] = m
    ids, weights, attention, agent = ids.to(device), weights.to(device), attention.to(device), agent.to(device)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
    targets, w, a = ids[:, 1:], weights[:, 1:], agent[:, 1:]
    token_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1),
                                                   reduction="none").view_as(targets)
    loss = (token_loss * w).sum() / w.sum()
    with torch.no_grad():
        agent_loss = (token_loss * a).sum() / a.sum().clamp(min=1)
    return loss, {"loss/total": float(loss.detach()), "loss/agent": float(agent_loss)}


def train_bc(model, tokenizer, examples, config: BCConfig, *, progress=None, metrics=None,
             should_stop=None) -> dict:
    """Train in place; returns the final figures. Callbacks: progress(fraction), metrics(step, dict), should_stop()."""
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01,
                                  betas=(0.9, 0.95))

    def lr_at(step: int) -> float:
        # Cosine over whichever runs out first, the steps or the wall time, so a run cut
        # by `max_seconds` still ends at a low learning rate.
        if step < config.warmup_steps:
            return config.learning_rate * (step + 1) / config.warmup_steps
        done = (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps)
        if config.max_seconds:
            done = max(done, (time.monotonic() - start) / config.max_seconds)
        return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, done))))

    start, step, last = time.monotonic(), 0, {}
    first_loss = None
    while step < config.max_steps:
        for indices in _batches(examples, config.batch_size, rng):
            if step >= config.max_steps or (config.max_seconds and time.monotonic() - start > config.max_seconds):
                break
            if should_stop and should_stop():
                break
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            loss, figures = batch_loss(model, examples, indices, pad_id=tokenizer.pad_token_id,
                                       observation_weight=config.observation_loss_weight)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite loss at step {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            figures["policy/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip))
            optimizer.step()
            step += 1
            first_loss = figures["loss/total"] if first_loss is None else first_loss
            last = figures
            if metrics and (step % 10 == 0 or step == 1):
                metrics(step, {**figures, "optim/lr": optimizer.param_groups[0]["lr"]})
            if progress:
                elapsed = (time.monotonic() - start) / config.max_seconds if config.max_seconds else 0
                progress(min(1.0, max(step / config.max_steps, elapsed)))
        else:
            continue
        break
    model.eval()
    return {"steps": step, "seconds": round(time.monotonic() - start, 1), "first_loss": first_loss, **last,
            "config": asdict(config)}
