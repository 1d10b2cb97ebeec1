"""Best-of-n through the served API: held-out tasks played by an outside client (the official
`openai` package) against `serve_policy`'s server with a reward model, one episode per task
and setting, the environment's tools carried out by the client.

    .venv/bin/python benchmarks/serve_best_of.py POLICY_DIR REWARD_MODEL_DIR [--worlds 10001] [--tasks 300] \
        [--best-of 1 4] [--temperature 1.0] [--json OUT]

The server runs in this process on 127.0.0.1 (a free port), as `manage.py serve_policy NAME
--reward-model ID` runs it. Every turn is one chat completion with `best_of: k` (k candidate
turns sampled, the reward model's favourite returned); `best_of: 1` is the policy alone. The
same task and seed for every k, so the settings are paired; success is the environment's
rubric. Reports success per setting with a paired 95% bootstrap interval of each gain over
best_of 1, and the wall time per episode.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path

from core import json_input

ROOT = Path(__file__).resolve().parent.parent


def play(client, runner, task, *, best_of: int, temperature: float, seed: int, max_tokens: int) -> bool:
    """One episode through the API; whether the rubric calls it correct."""
    episode = runner.start(task)
    messages = runner.env.opening_messages(task)
    tools = [t.as_openai() for t in runner.tools.values()]
    turn = 0
    while not episode.done:
        reply = client.chat.completions.create(
            model="served",
            messages=messages,
            tools=tools,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed * 1000 + turn,
            extra_body={"best_of": best_of},
        )
        message = reply.choices[0].message
        turn += 1
        if not message.tool_calls:  # plain text is the answer where the environment has an answer tool
            messages.append({"role": "assistant", "content": message.content or ""})
            if "answer" in runner.tools and (message.content or "").strip():
                episode.call("answer", {"text": message.content.strip()})
            else:
                result = episode.refuse(message.content or "", "no tool call; call one of the tools, or answer.")
                messages.append({"role": "user", "content": result.content})
            continue
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            if episode.done:
                break
            try:
                arguments = json_input.loads(call.function.arguments)
            except ValueError:
                arguments = call.function.arguments
            result = episode.call(call.function.name, arguments, call_id=call.id)
            if not result.done:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
    return bool(episode.outcome().correct)


def interval(gains: list[int], rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    means = sorted(sum(rng.choices(gains, k=len(gains))) / len(gains) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds)]


def main() -> None:
    import torch
    from openai import OpenAI

    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment
    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy")
    parser.add_argument("reward_model")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--worlds", nargs="+", type=int, default=[10_001])
    parser.add_argument("--tasks", type=int, default=300, help="at most this many tasks per world (0: all)")
    parser.add_argument("--best-of", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    server = PolicyServer(args.policy, name="served", threads=args.threads, reward_model=args.reward_model)
    httpd = serve(server, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = OpenAI(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="unused", max_retries=0)
    results: dict[int, list[int]] = {k: [] for k in args.best_of}
    seconds: dict[int, float] = dict.fromkeys(args.best_of, 0.0)
    try:
        for world in args.worlds:
            env = get_environment(args.environment, seed=world)
            runner = EpisodeRunner(env)
            tasks = [t for split in ("train", "dev", "eval") for t in env.tasks(split)]
            if args.tasks and len(tasks) > args.tasks:
                tasks = random.Random(world).sample(tasks, args.tasks)
            for i, task in enumerate(tasks):
                for k in args.best_of:  # interleaved task by task: a drift in speed favours neither
                    started = time.monotonic()
                    ok = play(
                        client,
                        runner,
                        task,
                        best_of=k,
                        temperature=args.temperature,
                        seed=world * 10_000 + i,
                        max_tokens=args.max_tokens,
                    )
                    seconds[k] += time.monotonic() - started
                    results[k].append(int(ok))
                if (i + 1) % 50 == 0:
                    print(
                        f"world {world}: {i + 1} tasks; "
                        + ", ".join(f"best_of {k}: {100 * sum(v) / len(v):.1f}%" for k, v in results.items()),
                        flush=True,
                    )
    finally:
        httpd.shutdown()
        httpd.server_close()
    base = results[args.best_of[0]]
    rows = []
    for k, values in results.items():
        gains = [a - b for a, b in zip(values, base)]
        low, high = interval(gains)
        row = {
            "best_of": k,
            "episodes": len(values),
            "success": sum(values) / len(values),
            "gain": sum(gains) / len(gains),
            "gain_interval": [low, high],
            "seconds_per_episode": seconds[k] / len(values),
        }
        rows.append(row)
        print(
            f"best_of {k}: {100 * row['success']:.1f}% of {len(values)} episodes; gain over best_of "
            f"{args.best_of[0]} {100 * row['gain']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]; "
            f"{row['seconds_per_episode']:.2f} s per episode"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
