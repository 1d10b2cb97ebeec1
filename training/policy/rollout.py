"""Batched multi-turn rollouts in the text browser.

Many episodes advance together. Each turn, the contexts of the live episodes are
left-padded into one batch, prefilled once, and decoded token by token with the
key-value cache until every row has produced <|end|> (or the action token limit); then
each action goes to its own browser episode and the observation is appended. Every
episode records its token ids, per token whether the agent produced it (the action mask),
and the log-probability of each agent token under the sampling distribution: what PPO
needs next.

Each episode samples with its own seeded generator, so a batched rollout gives the same
episodes as running them one at a time with the same seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from training.env.browser import Episode, TextBrowser
from training.env.corpus import TaskSpec
from training.env.rubric import Outcome, score_episode
from training.policy.layout import encode, observation_text, prompt_text


@dataclass
class RolloutConfig:
    temperature: float = 1.0  # 0 means greedy
    max_action_tokens: int = 48
    batch_size: int = 32
    max_context: int = 1536


@dataclass
class RolloutEpisode:
    task: TaskSpec
    episode: Episode
    ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    outcome: Outcome | None = None

    @property
    def agent_tokens(self) -> int:
        return sum(self.agent_mask)


@torch.no_grad()
def generate_actions(model, contexts: list[list[int]], generators: list[torch.Generator], *, temperature: float,
                     max_new: int, end_id: int, pad_id: int) -> tuple[list[list[int]], list[list[float]]]:
    """One action per context: token ids (ending with end_id when it came) and their log-probs."""
    device = next(model.parameters()).device
    batch, longest = len(contexts), max(len(c) for c in contexts)
    input_ids = torch.full((batch, longest), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros((batch, longest), dtype=torch.long, device=device)
    for i, c in enumerate(contexts):
        input_ids[i, longest - len(c):] = torch.tensor(c, device=device)
        attention[i, longest - len(c):] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
    past, logits = out.past_key_values, out.logits[:, -1, :]
    next_position = positions[:, -1] + 1
    tokens: list[list[int]] = [[] for _ in range(batch)]
    logps: list[list[float]] = [[] for _ in range(batch)]
    finished = [False] * batch
    for _ in range(max_new):
        scaled = logits.float() / temperature if temperature > 0 else logits.float()
        log_probs = torch.log_softmax(scaled, dim=-1)
        chosen = torch.full((batch,), pad_id, dtype=torch.long, device=device)
        for i in range(batch):
            if finished[i]:
                continue
            if temperature > 0:
                token = int(torch.multinomial(log_probs[i].exp().cpu(), 1, generator=generators[i]))
            else:
                token = int(log_probs[i].argmax())
            chosen[i] = token
            tokens[i].append(token)
            logps[i].append(float(log_probs[i, token]))
            finished[i] = token == end_id
        if all(finished):
            break
        attention = torch.cat([attention, torch.ones((batch, 1), dtype=torch.long, device=device)], dim=1)
        out = model(input_ids=chosen[:, None], attention_mask=attention, position_ids=next_position[:, None],
                    past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1, :]
        next_position = next_position + 1
    return tokens, logps


def rollout(model, tokenizer, browser: TextBrowser, tasks: list[TaskSpec], config: RolloutConfig,
            *, seeds: list[int] | None = None, progress=None) -> list[RolloutEpisode]:
    """Run one episode per task (in batches of `config.batch_size`)."""
    seeds = seeds if seeds is not None else list(range(len(tasks)))
    results: list[RolloutEpisode] = []
    for start in range(0, len(tasks), config.batch_size):
        chunk = list(zip(tasks[start:start + config.batch_size], seeds[start:start + config.batch_size]))
        results.extend(_rollout_batch(model, tokenizer, browser, chunk, config))
        if progress:
            progress(min(1.0, (start + len(chunk)) / len(tasks)))
    return results


def _rollout_batch(model, tokenizer, browser, chunk, config) -> list[RolloutEpisode]:
    end_id = tokenizer.convert_tokens_to_ids("<|end|>")
    assistant = encode(tokenizer, "<|assistant|>")
    episodes, generators = [], []
    for task, seed in chunk:
        prompt = encode(tokenizer, prompt_text(task.question))
        episodes.append(RolloutEpisode(task=task, episode=browser.reset(task.question), ids=list(prompt),
                                       agent_mask=[0] * len(prompt), logprobs=[0.0] * len(prompt)))
        generators.append(torch.Generator().manual_seed(seed))
    live = list(range(len(episodes)))
    while live:
        for i in live:
            e = episodes[i]
            e.ids += assistant
            e.agent_mask += [0] * len(assistant)
            e.logprobs += [0.0] * len(assistant)
        actions, logps = generate_actions(
            model, [episodes[i].ids for i in live], [generators[i] for i in live],
            temperature=config.temperature, max_new=config.max_action_tokens, end_id=end_id,
            pad_id=tokenizer.pad_token_id,
        )
        still = []
        for i, tokens, lp in zip(live, actions, logps):
            e = episodes[i]
            e.ids += tokens
            e.agent_mask += [1] * len(tokens)
            e.logprobs += lp
            if not tokens or tokens[-1] != end_id:  # ran out of action tokens: close the turn for it
                e.ids.append(end_id)
                e.agent_mask.append(0)
                e.logprobs.append(0.0)
            text = tokenizer.decode([t for t in tokens if t != end_id], skip_special_tokens=False)
            result = browser.step(e.episode, text)
            if result.done:
                continue
            obs = encode(tokenizer, observation_text(result.observation))
            e.ids += obs
            e.agent_mask += [0] * len(obs)
            e.logprobs += [0.0] * len(obs)
            if len(e.ids) + config.max_action_tokens + len(assistant) > config.max_context:
                e.episode.truncated = True
                continue
            still.append(i)
        live = still
    for e in episodes:
        e.outcome = score_episode(e.episode, e.task.answer)
    return episodes
