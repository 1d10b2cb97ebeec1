"""The policy server under concurrent clients, against one padded `generate` of the same prompts;
and how soon a streamed reply starts, against the whole reply.

    .venv/bin/python benchmarks/serve_concurrent.py POLICY_DIR [--clients 1 4 8 16] [--rounds 6]
        [--repeats 5] [--stream-clients 1 8] [--max-tokens 32] [--threads 2]

The server (training/policy/serving_http.py, as `manage.py serve_policy` runs it) serves on
127.0.0.1 in this process. For each number of clients C: C threads of another process (this
script again, so the clients' Python does not share the server's interpreter lock) each send
`--rounds` requests one after another over their own kept-alive connection (http.client), all
started together; the figure is requests answered per second, and each request's latency (p50,
p95). The floor is the model alone: one `model.generate` call of the same C prompts,
left-padded, greedy, the same token limit and the policy's end-of-turn tokens (so its rows are
the replies the server gives), in sequences per second, over `--rounds` calls (the prompts of
the clients' requests of each round), so it answers as many sequences as the served run. Each repeat measures the floor, then the
server, at once (floor, served, floor, served ...), and its ratio is served / floor of that pair:
the table gives every repeat's ratio, their minimum and median, so a goal is met only if it
holds in every repeat. Requests are the environment's task openings with its tools, greedy, at
most `--max-tokens` new tokens; tokens per second are printed for both. "joined" is the share
of requests admitted into a running batch (continuous batching) rather than starting one.

Then streamed replies (`stream: true`), C' clients at once for each of `--stream-clients`, each
sending `--rounds` requests: when the first chunk that carries the reply (content, or a tool
call's name) arrives, against the end of the stream, for a text reply (a question without tools)
and a tool-call reply (a task opening with its tools). The median and worst of the fractions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEXT_QUESTION = [{"role": "user", "content": "Say something."}]


def _bodies(environment: str, count: int, max_tokens: int) -> list[dict]:
    from training.envs.base import EpisodeRunner
    from training.envs.registry import get_environment

    env = get_environment(environment)
    tools = [t.as_openai() for t in EpisodeRunner(env).tools.values()]
    tasks = env.tasks("dev") or env.tasks("train")
    return [
        {
            "messages": env.opening_messages(tasks[i % len(tasks)]),
            "tools": tools,
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        for i in range(count)
    ]


def floor_run(server, bodies: list[dict], max_tokens: int) -> tuple[float, int]:
    """(seconds, tokens) of one padded greedy `generate` of the bodies' prompts."""
    import torch

    from training.policy.serving_requests import parse_request

    prompts = [server.prepare(parse_request(body)).prompt for body in bodies]
    width = max(len(p) for p in prompts)
    pad = server.tokenizer.pad_token_id if server.tokenizer.pad_token_id is not None else server.chat.stop_ids[0]
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    started = time.perf_counter()
    with torch.no_grad():
        out = server.model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=server.chat.stop_ids,
            pad_token_id=pad,
        )
    seconds = time.perf_counter() - started
    stops = set(server.chat.stop_ids)
    tokens = 0
    for row in out[:, width:].tolist():
        tokens += next((i for i, token in enumerate(row) if token in stops), len(row))
    return seconds, tokens


def _nth(bodies: list[dict], r: int, clients: int) -> list[dict]:
    """The bodies of the clients' `r`th requests (`served_run` sends these)."""
    return [bodies[(index + r * clients) % len(bodies)] for index in range(clients)]


def _ask(connection, body: dict) -> int:
    """One request over a kept-alive connection; its completion tokens."""
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    assert response.status == 200, answer
    return answer["usage"]["completion_tokens"]


def _ask_streamed(connection, body: dict) -> tuple[float, float]:
    """(seconds to the first chunk that carries the reply, seconds to the end) of a streamed request."""
    sent = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}))
    response = connection.getresponse()
    first = None
    for line in response:
        if first is None and line.startswith(b"data: {"):
            delta = (json.loads(line[6:])["choices"] or [{}])[0].get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                first = time.perf_counter() - sent
    assert response.status == 200
    whole = time.perf_counter() - sent
    return (whole if first is None else first), whole  # an empty reply: all of it at the end


def served_run(port: int, bodies: list[dict], clients: int, rounds: int, stream: bool = False) -> tuple:
    """(seconds, latencies, tokens) of `clients` closed-loop clients sending `rounds` requests
    each; streamed, (seconds, [(to the first chunk, to the end)], 0)."""
    start, latencies, tokens, lock = threading.Barrier(clients + 1), [], [0], threading.Lock()

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        start.wait()
        for r in range(rounds):
            body = bodies[(index + r * clients) % len(bodies)]
            sent = time.perf_counter()
            answer = _ask_streamed(connection, body) if stream else _ask(connection, body)
            with lock:
                latencies.append(answer if stream else time.perf_counter() - sent)
                tokens[0] += 0 if stream else answer
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, latencies, tokens[0]


def served_elsewhere(port: int, bodies: list[dict], clients: int, rounds: int, work: Path, stream=False) -> tuple:
    """`served_run` in a process of its own."""
    import subprocess

    path = work / "bodies.json"
    path.write_text(json.dumps(bodies))
    args = [sys.executable, __file__, "--as-clients", str(port), str(clients), str(rounds), str(path), str(stream)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=True)
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def concurrency_row(server, port: int, bodies: list[dict], clients: int, args, work: Path) -> dict:
    """Floor and served runs, interleaved, `args.repeats` times for `clients` clients."""
    floor_rates, floor_tokens, served_rates, served_tokens, latencies = [], [], [], [], []
    batcher = server.batcher
    sizes, joined = len(batcher.sizes), getattr(batcher, "joined", 0)
    for _ in range(args.repeats):
        # As many sequences as the served run answers: `rounds` generate calls of C prompts each.
        runs = [floor_run(server, _nth(bodies, r, clients), args.max_tokens) for r in range(args.rounds)]
        seconds = sum(seconds for seconds, _ in runs)
        floor_rates.append(clients * args.rounds / seconds)
        floor_tokens.append(sum(tokens for _, tokens in runs) / seconds)
        seconds, times, tokens = served_elsewhere(port, bodies, clients, args.rounds, work)
        served_rates.append(len(times) / seconds)
        served_tokens.append(tokens / seconds)
        latencies += times
    latencies.sort()
    ratios = [served / floor for served, floor in zip(served_rates, floor_rates)]
    starts = batcher.sizes[sizes:]
    return {
        "clients": clients,
        "floor_sequences_per_s": statistics.median(floor_rates),
        "served_requests_per_s": statistics.median(served_rates),
        "ratios": ratios,
        "min_ratio": min(ratios),
        "ratio": statistics.median(ratios),
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p95_ms": 1000 * latencies[max(0, round(0.95 * len(latencies)) - 1)],
        "floor_tokens_per_s": statistics.median(floor_tokens),
        "served_tokens_per_s": statistics.median(served_tokens),
        "rows_per_start": statistics.mean(rows for _, rows in starts),
        "joined": (getattr(batcher, "joined", 0) - joined) / max(1, sum(requests for requests, _ in starts)),
    }


def stream_row(port: int, kind: str, body: dict, clients: int, rounds: int, work: Path) -> dict:
    _, times, _ = served_elsewhere(port, [body], clients, rounds, work, stream=True)
    fractions = [first / whole for first, whole in times]
    return {
        "stream": kind,
        "clients": clients,
        "first_ms": 1000 * statistics.median(first for first, _ in times),
        "whole_ms": 1000 * statistics.median(whole for _, whole in times),
        "fraction": statistics.median(fractions),
        "worst_fraction": max(fractions),
    }


def print_tables(rows: list[dict], streams: list[dict]) -> None:
    print(
        "\n| clients | floor sequences/s | served requests/s | served / floor, each repeat | min | median "
        "| p50 ms | p95 ms | floor tokens/s | served tokens/s | rows a start | joined |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        each = " / ".join(f"{r:.2f}" for r in row["ratios"])
        print(
            f"| {row['clients']} | {row['floor_sequences_per_s']:.1f} | {row['served_requests_per_s']:.1f} | {each} | "
            f"{row['min_ratio']:.2f}x | {row['ratio']:.2f}x | {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | "
            f"{row['floor_tokens_per_s']:.0f} | {row['served_tokens_per_s']:.0f} | {row['rows_per_start']:.1f} | "
            f"{100 * row['joined']:.0f}% |"
        )
    print("\n| stream | clients | first chunk ms | whole reply ms | first / whole, median | worst |")
    print("|---|---|---|---|---|---|")
    for s in streams:
        print(
            f"| stream: {s['stream']} | {s['clients']} | {s['first_ms']:.1f} | {s['whole_ms']:.1f} | "
            f"{100 * s['fraction']:.0f}% | {100 * s['worst_fraction']:.0f}% |"
        )
    text = next(s for s in streams if s["stream"] == "text")
    print(f"\nStreamed: first content chunk at {text['first_ms']:.1f} ms of {text['whole_ms']:.1f} ms.")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-clients":  # the clients' process (served_elsewhere)
        port, clients, rounds, path = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
        print(json.dumps(served_run(port, json.loads(path.read_text()), clients, rounds, sys.argv[6] == "True")))
        return
    import tempfile

    import torch

    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=6, help="requests per client per run (default: 6)")
    parser.add_argument("--repeats", type=int, default=5, help="floor and served runs per client count")
    parser.add_argument("--stream-clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    bodies = _bodies(args.environment, 64, args.max_tokens)
    server = PolicyServer(args.policy, name="bench", threads=args.threads)
    httpd = serve(server, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    work = Path(tempfile.mkdtemp(prefix="serve-concurrent-"))
    served_elsewhere(port, bodies, 1, 2, work)  # warm-up
    floor_run(server, bodies[:2], 4)

    rows = []
    for clients in args.clients:
        rows.append(concurrency_row(server, port, bodies, clients, args, work))
        print(json.dumps(rows[-1]), flush=True)
    text_body = {"messages": TEXT_QUESTION, "temperature": 0, "max_tokens": args.max_tokens}
    streams = []
    for clients in args.stream_clients:
        for kind, body in (("text", text_body), ("tool call", bodies[0])):
            streams.append(stream_row(port, kind, body, clients, args.rounds, work))
            print(json.dumps(streams[-1]), flush=True)
    sizes = server.batcher.sizes
    httpd.shutdown()
    httpd.server_close()
    print(json.dumps({"largest_start_rows": max(rows for _, rows in sizes)}))
    print_tables(rows, streams)


if __name__ == "__main__":
    main()
