"""The OpenAI-compatible policy server (training/policy/serving.py) against its floor: the same
generation called in-process, without HTTP, JSON or the request's checks.

    .venv/bin/python benchmarks/serve_policy.py POLICY_DIR [--requests 30] [--max-tokens 48] [--threads 2]

The server runs in this process on 127.0.0.1 (a free port), like `manage.py serve_policy`.
Each request is the environment's opening of a task (system and user messages, its tools),
greedy, at most `--max-tokens` new tokens; the same request goes (1) to the floor,
`PolicyServer.complete` called directly, and (2) over HTTP with http.client, alternating
request by request so a drift in machine speed favours neither. Reports the median and p95
wall time of each, their ratio, and the tokens generated.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _reply(completion: dict) -> tuple:
    """A reply without its random ids: the text and the calls."""
    message = completion["choices"][0]["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return message.get("content"), calls


def main() -> None:
    import torch

    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment
    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve
    from training.policy.serving_requests import parse_request

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--requests", type=int, default=30, help="requests of each kind (default: 30)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    env = get_environment(args.environment)
    tools = [t.as_openai() for t in EpisodeRunner(env).tools.values()]
    tasks = env.tasks("dev") or env.tasks("train")
    bodies = [
        {
            "model": "bench",
            "messages": env.opening_messages(tasks[i % len(tasks)]),
            "tools": tools,
            "temperature": 0,
            "max_tokens": args.max_tokens,
        }
        for i in range(args.requests)
    ]
    server = PolicyServer(args.policy, name="bench", threads=args.threads)
    httpd = serve(server, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=120)

    def over_http(body: dict) -> dict:
        connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
        return answer

    floor, served, tokens = [], [], 0
    over_http(bodies[0])  # warm-up: the first generation allocates
    for body in bodies:
        started = time.perf_counter()
        direct = server.complete(parse_request(body))
        floor.append(time.perf_counter() - started)
        started = time.perf_counter()
        answer = over_http(body)
        served.append(time.perf_counter() - started)
        assert _reply(answer) == _reply(direct), (answer, direct)  # greedy: the same reply both ways
        tokens += answer["usage"]["completion_tokens"]
    httpd.shutdown()

    def p95(values: list[float]) -> float:
        return sorted(values)[max(0, round(0.95 * len(values)) - 1)]

    figures = {
        "requests": len(bodies),
        "floor_median_ms": 1000 * statistics.median(floor),
        "floor_p95_ms": 1000 * p95(floor),
        "served_median_ms": 1000 * statistics.median(served),
        "served_p95_ms": 1000 * p95(served),
        "ratio": statistics.median(served) / statistics.median(floor),
        "completion_tokens_per_request": tokens / len(bodies),
    }
    print(json.dumps(figures))
    print(
        "\n| requests | floor median ms | floor p95 ms | served median ms | served p95 ms | served / floor | tokens per reply |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {figures['requests']} | {figures['floor_median_ms']:.1f} | {figures['floor_p95_ms']:.1f} | "
        f"{figures['served_median_ms']:.1f} | {figures['served_p95_ms']:.1f} | {figures['ratio']:.2f}x | "
        f"{figures['completion_tokens_per_request']:.1f} |"
    )


if __name__ == "__main__":
    main()
