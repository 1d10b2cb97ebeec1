"""Batched multi-turn rollouts of a chat policy in an environment, one key-value cache per batch.

Any environment (training/envs/) and any Hugging Face chat model: each episode is its
environment's opening messages rendered by the policy's own chat template with the tools,
then turns of (the model's action, the tool results), built as in training/policy/chat.py.
The model's turn is parsed by its tool-call parser (training/policy/tool_calls.py) and each
call goes through the episode runner, which checks it against the tool's schema: a turn
that is no valid call is an error observation that uses a step, never a crash.

Many episodes advance together. The cache of a batch lives across turns: each turn only the
new context tokens of each episode (the tool results and the next generation prompt) are
fed, left-padded into one chunk with the padding masked out, and then actions are decoded
token by token until every live row has produced an end-of-turn token (or the action token
limit). Finished episodes leave the cache. Each episode records its token ids, per token
whether the agent produced it (the action mask: only sampled tokens), and the log-probability
of each agent token under the sampling distribution: what PPO needs next.

Each episode samples with its own seeded generator (its uniforms for a whole action drawn
up front, then one vectorised inverse-transform draw per token for all rows), so a batched
rollout gives the same episodes as running them one at a time with the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from training.envs.base import EnvTask, EpisodeRunner
from training.policy.chat import ChatFormat
from training.policy.episodes import RolloutEpisode, act, new_episode
from training.policy.limits import MAX_ACTION_TOKENS, MAX_CONTEXT


@dataclass
class RolloutConfig:
    temperature: float = 1.0  # 0 means greedy
    max_action_tokens: int = MAX_ACTION_TOKENS
    batch_size: int = 32
    max_context: int = MAX_CONTEXT
    threads: int = 0  # torch threads while rolling out; 0: automatic (rollout_threads)


SMALL_MODEL = 100_000_000  # parameters


def rollout_threads(model) -> int:
    """Torch threads for a rollout: 1 for a small model on the CPU, else torch's own choice.

    Decoding a small model is many tiny matrix products, one token at a time, and threads
    that spin waiting for each other lose badly when other work holds the cores. Measured
    with the default policy on the 2-core machine (benchmarks/rollout_throughput.py,
    RESULTS.md): 1 thread is about a fifth slower than 2 when the machine is idle, and 2.7
    times faster when other work keeps both cores busy; a worker rarely has the machine to
    itself, so 1.
    """
    device = next(model.parameters()).device
    if device.type == "cpu" and sum(p.numel() for p in model.parameters()) < SMALL_MODEL:
        return 1
    return torch.get_num_threads()


def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A full-attention cache layer that writes into a buffer with spare room (doubled when
        full) instead of concatenating: `DynamicLayer` copies the whole cache at every decoded
        token, which at rollout lengths (hundreds of tokens of observations) costs more than
        the model's own compute for a small policy."""

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.buffers, self.length = None, 0
            end = self.length + key_states.shape[-2]
            if self.buffers is None or end > self.buffers[0].shape[-2]:
                grown = []
                for buffer, states in zip(self.buffers or (None, None), (key_states, value_states)):
                    room = states.new_empty(*states.shape[:-2], max(64, 2 * end), states.shape[-1])
                    if buffer is not None:
                        room[..., : self.length, :] = buffer[..., : self.length, :]
                    grown.append(room)
                self.buffers = grown
            self.buffers[0][..., self.length : end, :] = key_states
            self.buffers[1][..., self.length : end, :] = value_states
            self.length = end
            self.keys, self.values = self.buffers[0][..., :end, :], self.buffers[1][..., :end, :]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if self.is_initialized and self.buffers is not None:
                self.buffers = [b[indices, ...] for b in self.buffers]
                self.keys, self.values = (b[..., : self.length, :] for b in self.buffers)

    return GrowingLayer


def new_cache(model):
    """A key-value cache for `model`: growing buffers where every layer is plain full
    attention (Llama-style), else whatever `DynamicCache` picks for the model's config."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    cache = DynamicCache(config=model.config)
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        growing = _growing_layer_class()
        cache.layers = [growing() for _ in cache.layers]
    return cache


class CachedBatch:
    """A batch of sequences in one key-value cache; rows may receive chunks of different lengths."""

    def __init__(self, model, pad_id: int):
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        self.past = new_cache(model)
        self.attention: torch.Tensor | None = None
        self.next_position: torch.Tensor | None = None
        self.keep_logits = True

    @torch.no_grad()
    def feed(self, chunks: list[list[int]], masks: list[list[int]] | None = None) -> torch.Tensor:
        """Append one chunk per row (left-padded, padding masked); returns each row's last logits."""
        masks = masks or [[1] * len(c) for c in chunks]
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunks), width), dtype=torch.long)
        for i, (c, m) in enumerate(zip(chunks, masks)):
            if c:
                ids[i, width - len(c) :] = torch.tensor(c)
                mask[i, width - len(c) :] = torch.tensor(m)
        return self.feed_tensors(ids.to(self.device), mask.to(self.device))

    @torch.no_grad()
    def feed_tensors(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """As `feed`, for chunks already left-padded into (rows, width) tensors on the device."""
        if self.attention is None:
            self.attention = mask
            self.next_position = torch.zeros(ids.size(0), dtype=torch.long, device=self.device)
        else:
            self.attention = torch.cat([self.attention, mask], dim=1)
        positions = self.next_position[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
        # Only the last position's logits are used: `logits_to_keep` skips the output
        # layer for the rest of a prefill (models without the argument compute them all).
        extra = {"logits_to_keep": 1} if self.keep_logits else {}
        try:
            out = self.model(
                input_ids=ids,
                attention_mask=self.attention,
                position_ids=positions,
                past_key_values=self.past,
                use_cache=True,
                **extra,
            )
        except TypeError:
            if not extra:
                raise
            self.keep_logits = False
            out = self.model(
                input_ids=ids,
                attention_mask=self.attention,
                position_ids=positions,
                past_key_values=self.past,
                use_cache=True,
            )
        self.past = out.past_key_values
        self.next_position = self.next_position + mask.sum(-1)
        return out.logits[:, -1, :]

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows` from the cache."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.past.batch_select_indices(index)
        self.attention = self.attention[index]
        self.next_position = self.next_position[index]


def sample_actions(
    batch: CachedBatch,
    logits: torch.Tensor,
    generators: list[torch.Generator],
    *,
    temperature: float,
    max_new: int,
    stop_ids: list[int],
) -> tuple[list[list[int]], list[list[float]], list[int]]:
    """Decode one action per row. Returns tokens, their log-probs, and per row the tokens
    sampled but not yet fed to the cache (the caller feeds them first next turn).

    Sampling is vectorised across rows by inverse transform: each row draws its uniforms
    for the whole action from its own generator up front (`max_new` of them, whether it
    uses them or not), so a row's tokens do not depend on which rows share its batch."""
    rows, device = logits.size(0), logits.device
    if temperature > 0:
        uniforms = torch.stack([torch.rand(max_new, generator=g, dtype=torch.float64) for g in generators]).to(device)
    tokens = torch.full((rows, max_new), batch.pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((rows, max_new), device=device)
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    stops = torch.tensor(stop_ids, dtype=torch.long, device=device)
    for step in range(max_new):
        scaled = logits.float() / temperature if temperature > 0 else logits.float()
        log_probs = torch.log_softmax(scaled, dim=-1)
        if temperature > 0:
            cdf = log_probs.double().exp().cumsum(-1)
            token = torch.searchsorted(cdf, uniforms[:, step : step + 1] * cdf[:, -1:], right=True).squeeze(1)
            token = token.clamp_(max=log_probs.size(-1) - 1)
        else:
            token = log_probs.argmax(-1)
        active = ~finished
        tokens[:, step] = torch.where(active, token, batch.pad_id)
        logps[:, step] = log_probs.gather(1, token[:, None]).squeeze(1)
        lengths += active
        finished |= torch.isin(token, stops)
        if step == max_new - 1 or bool(finished.all()):
            break
        logits = batch.feed_tensors(tokens[:, step : step + 1], active[:, None].long())
    # Rows still active at the last step have their last token not yet in the cache.
    last_active = (lengths == step + 1).tolist()
    token_rows, logp_rows = tokens.tolist(), logps.tolist()
    out_tokens = [t[:n] for t, n in zip(token_rows, lengths.tolist())]
    out_logps = [lp[: len(t)] for lp, t in zip(logp_rows, out_tokens)]
    unfed = [t[-1] if t and last else None for t, last in zip(out_tokens, last_active)]
    return out_tokens, out_logps, unfed


def rollout(
    model,
    tokenizer,
    runner,
    tasks: list[EnvTask],
    config: RolloutConfig,
    *,
    seeds: list[int] | None = None,
    progress=None,
    chat: ChatFormat | None = None,
) -> list[RolloutEpisode]:
    """Run one episode per task (in batches of `config.batch_size`). `runner` is an
    EpisodeRunner, or a function giving each task its runner (tasks of several worlds in one
    batch). `chat` is the policy's format (its chat template and tool-call parser)."""
    chat = chat or ChatFormat.for_policy(tokenizer, getattr(model, "name_or_path", None) or None)
    seeds = seeds if seeds is not None else list(range(len(tasks)))
    results: list[RolloutEpisode] = []
    previous = torch.get_num_threads()
    torch.set_num_threads(config.threads or rollout_threads(model))
    try:
        for start in range(0, len(tasks), config.batch_size):
            chunk = list(zip(tasks[start : start + config.batch_size], seeds[start : start + config.batch_size]))
            results.extend(_rollout_batch(model, chat, runner, chunk, config))
            if progress:
                progress(min(1.0, (start + len(chunk)) / len(tasks)))
    finally:
        torch.set_num_threads(previous)
    return results


@dataclass
class _Start:
    """An episode ready to be played on: its state, the tokens the cache has not yet seen, and
    the per-episode pieces of the turn loop."""

    episode: RolloutEpisode
    pending: list[int]
    parser: object
    tools: list[dict]
    answer_tool: str | None


def _runner_for(runner, task):
    return runner(task) if callable(runner) and not isinstance(runner, EpisodeRunner) else runner


def _fresh_start(chat: ChatFormat, runner: EpisodeRunner, task: EnvTask) -> _Start:
    e = new_episode(runner, task)
    tools = [t.as_openai() for t in runner.tools.values()]
    opening = chat.opening(e.messages, tools)
    e.extend(opening, agent=False)
    return _Start(
        e,
        list(opening),
        chat.parser(list(runner.tools.values())),
        tools,
        "answer" if "answer" in runner.tools else None,
    )


def _rollout_batch(model, chat: ChatFormat, runner, chunk, config) -> list[RolloutEpisode]:
    starts = [_fresh_start(chat, _runner_for(runner, task), task) for task, _ in chunk]
    return _play(model, chat, starts, [seed for _, seed in chunk], config)


def _play(model, chat: ChatFormat, starts: list[_Start], seeds: list[int], config) -> list[RolloutEpisode]:
    """Play every start to its end, all rows in one cache, each sampling with its own seed."""
    episodes = [s.episode for s in starts]
    pending = [s.pending for s in starts]
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    batch = CachedBatch(model, chat.tokenizer.pad_token_id)
    live = list(range(len(episodes)))
    stop_ids = set(chat.stop_ids)
    while live:
        logits = batch.feed([pending[i] for i in live])
        actions, logps, unfed = sample_actions(
            batch,
            logits,
            [generators[i] for i in live],
            temperature=config.temperature,
            max_new=config.max_action_tokens,
            stop_ids=chat.stop_ids,
        )
        keep, still = [], []
        for row, (i, tokens, lp, tail) in enumerate(zip(live, actions, logps, unfed)):
            e = episodes[i]
            e.extend(tokens, agent=True, logprobs=lp)
            pending[i] = [tail] if tail is not None else []
            if not tokens or tokens[-1] not in stop_ids:  # ran out of action tokens: close the turn for it
                e.extend(chat.turn_end, agent=False)
                pending[i] += chat.turn_end
            text = chat.decode(tokens)
            e.messages.append({"role": "assistant", "content": text})
            results = act(e, starts[i].parser, text, starts[i].answer_tool)
            if e.episode.done:
                continue
            context = chat.continuation(e.messages, starts[i].tools, results)
            e.extend(context, agent=False)
            pending[i] += context
            if len(e.ids) + config.max_action_tokens > config.max_context:
                e.episode.record.truncated = True
                continue
            keep.append(row)
            still.append(i)
        if still and len(still) < len(live):
            batch.keep(keep)
        live = still
    for e in episodes:
        e.outcome = e.episode.outcome()
    return episodes


# --- Answer branches ----------------------------------------------------------------------


def _final_turn_start(agent_mask: list[int]) -> int:
    """Where the last run of agent tokens (the final turn) begins."""
    end = len(agent_mask)
    while end and not agent_mask[end - 1]:
        end -= 1
    start = end
    while start and agent_mask[start - 1]:
        start -= 1
    return start


def _branch_start(chat: ChatFormat, runner: EpisodeRunner, source: RolloutEpisode) -> _Start | None:
    """A new episode at the point where `source` gave its final answer: its turns before the
    answer carried out again in a fresh episode (the same calls, so the same pages), its tokens
    up to the answer taken as they were. None when the environment answers the replayed calls
    differently (it is not deterministic), so the branch would not share the source's path."""
    start = _fresh_start(chat, runner, source.task)
    e = start.episode
    last = max(i for i, m in enumerate(source.messages) if m["role"] == "assistant")
    for message in source.messages[source.opening : last]:
        if message["role"] != "assistant":
            continue
        e.messages.append(dict(message))
        act(e, start.parser, message["content"], start.answer_tool)
        if e.episode.done:
            return None
    if e.messages != source.messages[:last]:
        return None
    cut = _final_turn_start(source.agent_mask)
    e.ids, e.agent_mask, e.logprobs = source.ids[:cut], source.agent_mask[:cut], source.logprobs[:cut]
    start.pending = list(e.ids)
    return start


def branchable(episode: RolloutEpisode) -> bool:
    """An episode worth branching: it ended with an answer after at least one tool call (an
    answer with nothing read has no evidence to check it against)."""
    record = episode.episode.record
    return record.answer is not None and record.calls > 1 and not record.truncated


def answer_branches(
    model,
    tokenizer,
    runner,
    episodes: list[RolloutEpisode],
    config: RolloutConfig,
    *,
    branches: int,
    seeds: list[int],
    chat: ChatFormat | None = None,
    progress=None,
) -> tuple[list[list[RolloutEpisode]], int]:
    """For each episode, `branches` more episodes that share its path up to its final answer
    (the same tool calls and pages) and sample the final turn afresh at `config.temperature`.

    Pairs of a path with different answers are the data that teaches a reward model to check
    an answer against what was read (docs/loop.md). A branch's new turn is the policy's own:
    mostly an answer, sometimes another tool call, after which it plays on as any episode.
    Returns (the branches of each episode, [] where it is not `branchable`; how many episodes
    could not be replayed). `seeds` gives one seed per episode; branch j of it samples with a
    seed derived from it.
    """
    chat = chat or ChatFormat.for_policy(tokenizer, getattr(model, "name_or_path", None) or None)
    starts, owners, branch_seeds, unreplayable = [], [], [], 0
    for index, (source, seed) in enumerate(zip(episodes, seeds)):
        if not branchable(source):
            continue
        for j in range(branches):
            start = _branch_start(chat, _runner_for(runner, source.task), source)
            if start is None:
                unreplayable += 1
                break
            starts.append(start)
            owners.append(index)
            branch_seeds.append(seed * 1_000 + 7 + j)
    found: list[list[RolloutEpisode]] = [[] for _ in episodes]
    previous = torch.get_num_threads()
    torch.set_num_threads(config.threads or rollout_threads(model))
    try:
        for first in range(0, len(starts), config.batch_size):
            played = _play(
                model,
                chat,
                starts[first : first + config.batch_size],
                branch_seeds[first : first + config.batch_size],
                config,
            )
            for owner, branch in zip(owners[first : first + config.batch_size], played):
                found[owner].append(branch)
            if progress:
                progress(min(1.0, (first + len(played)) / len(starts)))
    finally:
        torch.set_num_threads(previous)
    return found, unreplayable
