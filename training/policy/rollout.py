"""Batched multi-turn rollouts in the text browser, with one key-value cache per batch.

Many episodes advance together. The cache of a batch lives across turns: each turn only
the new tokens of each episode (the observation, and the `<|assistant|>` that opens its
next action) are fed, left-padded into one chunk with the padding masked out, and then
actions are decoded token by token until every live row has produced `<|end|>` (or the
action token limit). Finished episodes leave the cache. Each episode records its token
ids, per token whether the agent produced it (the action mask), and the log-probability
of each agent token under the sampling distribution: what PPO needs next.

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

    def extend(self, tokens: list[int], *, agent: bool, logprobs: list[float] | None = None) -> None:
        self.ids += tokens
        self.agent_mask += [int(agent)] * len(tokens)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(tokens)


class CachedBatch:
    """A batch of sequences in one key-value cache; rows may receive chunks of different lengths."""

    def __init__(self, model, pad_id: int):
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        self.past = None
        self.attention: torch.Tensor | None = None
        self.next_position: torch.Tensor | None = None

    @torch.no_grad()
    def feed(self, chunks: list[list[int]], masks: list[list[int]] | None = None) -> torch.Tensor:
        """Append one chunk per row (left-padded, padding masked); returns each row's last logits."""
        masks = masks or [[1] * len(c) for c in chunks]
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), self.pad_id, dtype=torch.long, device=self.device)
        mask = torch.zeros((len(chunks), width), dtype=torch.long, device=self.device)
        for i, (c, m) in enumerate(zip(chunks, masks)):
            if c:
                ids[i, width - len(c):] = torch.tensor(c, device=self.device)
                mask[i, width - len(c):] = torch.tensor(m, device=self.device)
        if self.attention is None:
            self.attention = mask
            self.next_position = torch.zeros(len(chunks), dtype=torch.long, device=self.device)
        else:
            self.attention = torch.cat([self.attention, mask], dim=1)
        positions = self.next_position[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=self.attention, position_ids=positions,
                         past_key_values=self.past, use_cache=True)
        self.past = out.past_key_values
        self.next_position = self.next_position + mask.sum(-1)
        return out.logits[:, -1, :]

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows` from the cache."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.past.batch_select_indices(index)
        self.attention = self.attention[index]
        self.next_position = self.next_position[index]


def sample_actions(batch: CachedBatch, logits: torch.Tensor, generators: list[torch.Generator], *,
                   temperature: float, max_new: int, end_id: int) -> tuple[list[list[int]], list[list[float]], list[int]]:
    """Decode one action per row. Returns tokens, their log-probs, and per row the tokens
    sampled but not yet fed to the cache (the caller feeds them first next turn)."""
    rows = logits.size(0)
    tokens: list[list[int]] = [[] for _ in range(rows)]
    logps: list[list[float]] = [[] for _ in range(rows)]
    finished = [False] * rows
    for step in range(max_new):
        scaled = logits.float() / temperature if temperature > 0 else logits.float()
        log_probs = torch.log_softmax(scaled, dim=-1)
        fed, masks = [], []
        for i in range(rows):
            if finished[i]:
                fed.append([batch.pad_id])
                masks.append([0])
                continue
            if temperature > 0:
                token = int(torch.multinomial(log_probs[i].exp().cpu(), 1, generator=generators[i]))
            else:
                token = int(log_probs[i].argmax())
            tokens[i].append(token)
            logps[i].append(float(log_probs[i, token]))
            finished[i] = token == end_id
            fed.append([token])
            masks.append([1])
        if all(finished) or step == max_new - 1:
            # The tokens just sampled are not in the cache yet.
            return tokens, logps, [t[-1] if t and m[0] else None for t, m in zip(tokens, masks)]
        logits = batch.feed(fed, masks)
    return tokens, logps, [None] * rows


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
    episodes = [RolloutEpisode(task=task, episode=browser.reset(task.question)) for task, _ in chunk]
    generators = [torch.Generator().manual_seed(seed) for _, seed in chunk]
    # What each live row must feed before its next action: the prompt at first.
    pending = [encode(tokenizer, prompt_text(task.question)) for task, _ in chunk]
    for e, tokens in zip(episodes, pending):
        e.extend(tokens, agent=False)
    batch = CachedBatch(model, tokenizer.pad_token_id)
    live = list(range(len(episodes)))
    while live:
        for i in live:
            episodes[i].extend(assistant, agent=False)
        logits = batch.feed([pending[i] + assistant for i in live])
        actions, logps, unfed = sample_actions(batch, logits, [generators[i] for i in live],
                                               temperature=config.temperature, max_new=config.max_action_tokens,
                                               end_id=end_id)
        keep, still = [], []
        for row, (i, tokens, lp, tail) in enumerate(zip(live, actions, logps, unfed)):
            e = episodes[i]
            e.extend(tokens, agent=True, logprobs=lp)
            pending[i] = [tail] if tail is not None else []
            if not tokens or tokens[-1] != end_id:  # ran out of action tokens: close the turn for it
                e.extend([end_id], agent=False)
                pending[i].append(end_id)
            text = tokenizer.decode([t for t in tokens if t != end_id], skip_special_tokens=False)
            result = browser.step(e.episode, text)
            if result.done:
                continue
            obs = encode(tokenizer, observation_text(result.observation))
            e.extend(obs, agent=False)
            pending[i] += obs
            if len(e.ids) + config.max_action_tokens + len(assistant) > config.max_context:
                e.episode.truncated = True
                continue
            keep.append(row)
            still.append(i)
        if still and len(still) < len(live):
            batch.keep(keep)
        live = still
    for e in episodes:
        e.outcome = score_episode(e.episode, e.task.answer)
    return episodes
