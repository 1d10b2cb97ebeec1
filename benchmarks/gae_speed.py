"""Generalised advantage estimation: the vectorised reverse scan PPO uses against the same
computation one row at a time (the loop it replaced), interleaved on one batch.

    .venv/bin/python benchmarks/gae_speed.py [--rows 64] [--tokens 200] [--repeats 7]

The batch has the compact (rows, agent tokens) layout PPO builds: each row's mask is 1 on a
prefix of random length, as padded episodes are. Both give the same advantages (checked
here and in tests/training/test_ppo_math.py); the figure is the median time of each.
"""

from __future__ import annotations

import argparse
import statistics
import time


def gae_row_by_row(rewards, values, mask, gamma: float, lam: float):
    """The former implementation: a Python loop per row and per token."""
    import torch

    advantages = torch.zeros_like(rewards)
    for row in range(rewards.shape[0]):
        running, next_value = 0.0, 0.0
        for t in range(rewards.shape[1] - 1, -1, -1):
            if not mask[row, t]:
                continue
            delta = rewards[row, t] + gamma * next_value - values[row, t]
            running = delta + gamma * lam * running
            advantages[row, t] = running
            next_value = values[row, t]
    return advantages * mask, (advantages + values) * mask


def main() -> None:
    import torch

    from training.rl.ppo_math import gae

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    rewards = torch.randn(args.rows, args.tokens, generator=generator)
    values = torch.randn(args.rows, args.tokens, generator=generator)
    lengths = torch.randint(1, args.tokens + 1, (args.rows,), generator=generator)
    mask = (torch.arange(args.tokens)[None, :] < lengths[:, None]).float()

    timings = {"vectorised": [], "row by row": []}
    for _ in range(args.repeats):  # interleaved, so both see the same machine
        for name, fn in (
            ("vectorised", lambda: gae(rewards, values, mask, gamma=1.0, lam=0.95)),
            ("row by row", lambda: gae_row_by_row(rewards, values, mask, 1.0, 0.95)),
        ):
            began = time.perf_counter()
            result = fn()
            timings[name].append(time.perf_counter() - began)
            if name == "vectorised":
                fast = result
            else:
                assert torch.allclose(fast[0], result[0], atol=1e-4), "the two disagree"
    fast, slow = (statistics.median(timings[k]) for k in ("vectorised", "row by row"))
    print(
        f"GAE on {args.rows} x {args.tokens} (median of {args.repeats}, 1 thread): vectorised "
        f"{fast * 1e3:.2f} ms, row by row {slow * 1e3:.1f} ms, {slow / fast:.0f}x faster"
    )


if __name__ == "__main__":
    main()
