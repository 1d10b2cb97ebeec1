"""Rollout throughput (agent tokens per second) against plain `model.generate` on the same
batch and lengths, in the same run.

    .venv/bin/python benchmarks/rollout_throughput.py --policy var/policies/default-bc [--batch 32] [--repeats 3]
        [--tasks 124] [--environment encyclopedia] [--baseline-tree OTHER_CHECKOUT]

The rollout plays whole multi-turn episodes on eval tasks at temperature 1 (the policy's
chat template and tool-call parser, the environment's tools through the episode runner,
observations fed into the cache, per-episode generators). The baseline asks
`model.generate` for the same number of sequences, each starting from the same prompts and
producing exactly the mean number of agent tokens per episode (sampling, no early stop),
so it does no environment work and generates every token in one call. Medians of repeats.
With `--tasks` larger than `--batch` (at most the 124 eval tasks), the rollout plays that
many episodes and the baseline is timed per batch-sized call, summed.

`--baseline-tree` times another checkout of Arbiter (for example the commit before a
change, from `git worktree add`) in the same repeats, alternating with this one: each
repeat runs that checkout's own copy of this script for one repeat in a subprocess (same
policy, tasks, batch and threads) and reads its rollout time, so that the two codes are
compared on the same noisy machine at the same moment.

It also prints the turn-synchronous step ratio: actions are decoded turn by turn for the
whole batch, so a turn takes as many decode steps as its longest action, and the batch as
many as the sum of those. Mean agent tokens per episode / that sum is the ratio the
rollout would reach if observations cost nothing to prefill and each of its decode steps
cost what one of generate's does (on a CPU a step of fewer rows costs less, so the rollout
can beat it). And it times a second, diagnostic baseline: `model.generate` of the same
number of tokens from each episode's own context before its last action, which is what
the rollout's attention reads: the share of the gap that is long contexts, not turns.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def decode_steps(episodes) -> int:
    """Decode steps of a turn-synchronous batch: per turn, the longest action of the live episodes."""
    per_turn: dict[int, int] = {}
    for e in episodes:
        turn, length, inside = 0, 0, False
        for m in e.agent_mask + [0]:
            if m:
                length, inside = length + 1, True
            elif inside:
                per_turn[turn] = max(per_turn.get(turn, 0), length)
                turn, length, inside = turn + 1, 0, False
    return sum(per_turn.values())


def last_action_context(episode) -> list[int]:
    """The episode's tokens before its last action (up to and with that action's `<|assistant|>`)."""
    mask = episode.agent_mask
    end = max((k for k, m in enumerate(mask) if m), default=len(mask) - 1)
    start = end
    while start > 0 and mask[start - 1]:
        start -= 1
    return episode.ids[:start]


def baseline_repeat(tree: str, args) -> tuple[int, float]:
    """(agent tokens, rollout seconds) of one repeat of another checkout's copy of this script."""
    command = [
        sys.executable,
        "benchmarks/rollout_throughput.py",
        "--policy",
        str(Path(args.policy).resolve()),
        "--batch",
        str(args.batch),
        "--repeats",
        "1",
        "--threads",
        str(args.threads),
    ]
    if args.tasks:
        command += ["--tasks", str(args.tasks)]
    out = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True).stdout
    found = re.search(r"rollout (\d+) agent tokens in ([\d.]+) s", out)
    if not found:
        raise SystemExit(f"no rollout timing in the baseline's output:\n{out[-2000:]}")
    return int(found.group(1)), float(found.group(2))


def main() -> None:
    import torch

    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment
    from training.policy.chat import ChatFormat
    from training.policy.model_io import load_policy
    from training.policy.rollout import RolloutConfig, rollout

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(ROOT / "var" / "policies" / "default-bc"))
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--tasks", type=int, default=None, help="episodes per repeat (default: one batch)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (1 is steadier on a busy shared CPU)")
    parser.add_argument("--baseline-tree", default=None, help="another checkout to time in the same repeats")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.policy)
    chat = ChatFormat.for_policy(tokenizer, args.policy)
    env = get_environment(args.environment)
    runner = EpisodeRunner(env)
    tools = [t.as_openai() for t in runner.tools.values()]
    tasks = env.tasks("eval")[: args.tasks or args.batch]

    def generate_seconds(prompts: list[list[int]], per_episode: int, seed: int) -> tuple[float, int]:
        """model.generate from these prompts, a batch at a time: (seconds, tokens generated)."""
        seconds, generated = 0.0, 0
        for start in range(0, len(prompts), args.batch):
            chunk = prompts[start : start + args.batch]
            width = max(map(len, chunk))
            ids = torch.full((len(chunk), width), tokenizer.pad_token_id)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, p in enumerate(chunk):
                ids[i, width - len(p) :] = torch.tensor(p)
                mask[i, width - len(p) :] = 1
            torch.manual_seed(seed)
            begin = time.perf_counter()
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    max_new_tokens=per_episode,
                    min_new_tokens=per_episode,
                    pad_token_id=tokenizer.pad_token_id,
                )
            seconds += time.perf_counter() - begin
            generated += (out.shape[1] - width) * len(chunk)
        return seconds, generated

    questions = [chat.opening(env.opening_messages(t), tools) for t in tasks]
    long_context = []
    names = ["this rollout"] + ([f"--baseline-tree {args.baseline_tree}"] if args.baseline_tree else [])
    rows: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name in names}
    for r in range(args.repeats):
        for name in names:
            if name != "this rollout":
                agent_tokens, rollout_s = baseline_repeat(args.baseline_tree, args)
                per_episode = max(1, round(agent_tokens / len(tasks)))
                generate_s, generated = generate_seconds(questions, per_episode, r)
                rows[name].append((agent_tokens / rollout_s, generated / generate_s, per_episode, float("nan")))
                print(f"repeat {r + 1}, {name}: rollout {agent_tokens} agent tokens in {rollout_s:.2f} s", flush=True)
                continue
            start = time.perf_counter()
            episodes = rollout(
                model,
                tokenizer,
                runner,
                tasks,
                RolloutConfig(temperature=1.0, batch_size=args.batch, threads=args.threads),
                seeds=[1000 * r + i for i in range(len(tasks))],
                chat=chat,
            )
            rollout_s = time.perf_counter() - start
            agent_tokens = sum(e.agent_tokens for e in episodes)
            per_episode = max(1, round(agent_tokens / len(episodes)))
            generate_s, generated = generate_seconds(questions, per_episode, r)
            contexts = [last_action_context(e) for e in episodes]
            seconds, tokens = generate_seconds(contexts, per_episode, r)
            long_context.append((tokens / seconds, sum(map(len, contexts)) / len(contexts)))
            steps = sum(decode_steps(episodes[b : b + args.batch]) for b in range(0, len(episodes), args.batch))
            bound = agent_tokens / min(args.batch, len(episodes)) / steps
            rows[name].append((agent_tokens / rollout_s, generated / generate_s, per_episode, bound))
            print(
                f"repeat {r + 1}, {name}: rollout {agent_tokens} agent tokens in {rollout_s:.2f} s; "
                f"generate {generated} tokens in {generate_s:.2f} s",
                flush=True,
            )
    print(f"\nbatch {args.batch}, {len(tasks)} episodes, medians of {args.repeats}:")
    print(
        "| code | agent tokens per episode | rollout agent tokens/s | model.generate tokens/s | rollout / generate "
        "| turn-synchronous step ratio |"
    )
    print("|---|---|---|---|---|---|")
    for name, found in rows.items():
        print(
            f"| {name} | {statistics.median(r[2] for r in found):.0f} | {statistics.median(r[0] for r in found):.0f} "
            f"| {statistics.median(r[1] for r in found):.0f} | {statistics.median(r[0] / r[1] for r in found):.2f} "
            f"| {statistics.median(r[3] for r in found):.2f} |"
        )
    print(
        f"model.generate from each episode's context before its last action (mean "
        f"{statistics.median(c[1] for c in long_context):.0f} tokens, not the question's "
        f"{sum(map(len, questions)) / len(questions):.0f}), the same number of tokens: "
        f"{statistics.median(c[0] for c in long_context):.0f} tokens/s; this rollout / that: "
        f"{statistics.median(r[0] for r in rows['this rollout']) / statistics.median(c[0] for c in long_context):.2f}"
    )


if __name__ == "__main__":
    main()
