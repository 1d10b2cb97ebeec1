"""Rollout throughput (agent tokens per second) against plain `model.generate` on the same
batch and lengths, in the same run.

    .venv/bin/python benchmarks/rollout_throughput.py --policy var/policies/default-bc [--batch 32] [--repeats 3]

The rollout plays whole multi-turn episodes on eval tasks at temperature 1 (browser steps,
observations fed into the cache, per-episode generators). The baseline asks
`model.generate` for the same number of sequences, each starting from the same prompts and
producing exactly the mean number of agent tokens per episode (sampling, no early stop),
so it does no environment work and generates every token in one call. Medians of repeats.

It also prints the decode bound: actions are decoded turn by turn for the whole batch, so
a turn takes as many decode steps as its longest action, and the batch as many as the sum
of those. Mean agent tokens per episode / that sum is the ratio the rollout would reach if
observations cost nothing to prefill and each decode step cost what one of generate's does.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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


def main() -> None:
    import torch

    from training.env.browser import TextBrowser
    from training.env.corpus import generate_corpus, generate_tasks
    from training.policy.layout import encode, prompt_text
    from training.policy.model_io import load_policy
    from training.policy.rollout import RolloutConfig, rollout

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(ROOT / "var" / "policies" / "default-bc"))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (1 is steadier on a busy shared CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.policy)
    corpus = generate_corpus(seed=0)
    tasks = [t for t in generate_tasks(corpus, seed=0) if t.split == "eval"][: args.batch]
    browser = TextBrowser(corpus)
    rows = []
    for r in range(args.repeats):
        start = time.perf_counter()
        episodes = rollout(model, tokenizer, browser, tasks, RolloutConfig(temperature=1.0, batch_size=args.batch),
                           seeds=[1000 * r + i for i in range(len(tasks))])
        rollout_s = time.perf_counter() - start
        agent_tokens = sum(e.agent_tokens for e in episodes)
        per_episode = max(1, round(agent_tokens / len(episodes)))
        prompts = [encode(tokenizer, prompt_text(t.question) + "<|assistant|>") for t in tasks]
        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), tokenizer.pad_token_id)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        torch.manual_seed(r)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                 max_new_tokens=per_episode, min_new_tokens=per_episode,
                                 pad_token_id=tokenizer.pad_token_id)
        generate_s = time.perf_counter() - start
        generated = (out.shape[1] - width) * len(prompts)
        bound = agent_tokens / len(episodes) / decode_steps(episodes)
        rows.append((agent_tokens / rollout_s, generated / generate_s, per_episode, bound))
        print(f"repeat {r + 1}: rollout {agent_tokens} agent tokens in {rollout_s:.2f} s; generate {generated} tokens "
              f"in {generate_s:.2f} s", flush=True)
    ratio = [r[0] / r[1] for r in rows]
    print(f"\nbatch {args.batch}, {rows[0][2]} agent tokens per episode (mean), medians of {args.repeats}:")
    print("| rollout agent tokens/s | model.generate tokens/s | rollout / generate |")
    print("|---|---|---|")
    print(f"| {statistics.median(r[0] for r in rows):.0f} | {statistics.median(r[1] for r in rows):.0f} | "
          f"{statistics.median(ratio):.2f} |")
    print(f"decode bound (mean agent tokens per episode / turn-synchronous decode steps): "
          f"{statistics.median(r[3] for r in rows):.2f}")


if __name__ == "__main__":
    main()
