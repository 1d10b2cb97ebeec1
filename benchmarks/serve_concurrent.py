"""The policy server under concurrent clients, against one padded `generate` of the same prompts.

    .venv/bin/python benchmarks/serve_concurrent.py POLICY_DIR [--clients 1 4 8] [--rounds 6]
        [--max-tokens 32] [--threads 2]

The server (training/policy/serving_http.py, as `manage.py serve_policy` runs it) serves on
127.0.0.1 in this process. For each number of clients C: C threads of another process (this
script again, so the clients' Python does not share the server's interpreter lock) each send
`--rounds` requests one after another over their own kept-alive connection (http.client), all
started together; the figure is requests answered per second, and each request's latency (p50,
p95).
The floor, measured between the served runs (floor, served, floor, served ...), is the model
alone: one `model.generate` call of the same C prompts, left-padded, greedy, the same token
limit and the policy's end-of-turn tokens (so its rows are the replies the server gives), in
sequences per second. Requests are the environment's task openings with its tools, greedy, at
most `--max-tokens` new tokens; tokens per second are printed for both.

Then one streamed request: when its first content chunk arrives against the whole reply.
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
sys.path.insert(0, str(ROOT))


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


def served_run(port: int, bodies: list[dict], clients: int, rounds: int) -> tuple[float, list[float], int]:
    """(seconds, latencies, tokens) of `clients` closed-loop clients sending `rounds` requests each."""
    start, latencies, tokens, lock = threading.Barrier(clients + 1), [], [0], threading.Lock()

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        start.wait()
        for r in range(rounds):
            body = bodies[(index + r * clients) % len(bodies)]
            sent = time.perf_counter()
            connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert response.status == 200, answer
            with lock:
                latencies.append(time.perf_counter() - sent)
                tokens[0] += answer["usage"]["completion_tokens"]
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, latencies, tokens[0]


def served_elsewhere(port: int, bodies: list[dict], clients: int, rounds: int, work: Path) -> tuple:
    """`served_run` in a process of its own: (seconds, latencies, tokens)."""
    import subprocess

    path = work / "bodies.json"
    path.write_text(json.dumps(bodies))
    args = [sys.executable, __file__, "--as-clients", str(port), str(clients), str(rounds), str(path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=True)
    seconds, latencies, tokens = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, latencies, tokens


def first_chunk(port: int, body: dict) -> tuple[float, float, int]:
    """(seconds to the first content chunk, seconds to the end, content chunks) of a streamed reply."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    sent = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}))
    response = connection.getresponse()
    first, pieces = None, 0
    for line in response:
        if line.startswith(b"data: {") and b'"content": "' in line and b'"content": ""' not in line:
            first = first or time.perf_counter() - sent
            pieces += 1
    return first or float("nan"), time.perf_counter() - sent, pieces


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-clients":  # the clients' process (served_elsewhere)
        port, clients, rounds, path = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
        print(json.dumps(served_run(port, json.loads(path.read_text()), clients, rounds)))
        return
    import tempfile

    import torch

    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy")
    parser.add_argument("--environment", default="encyclopedia")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=6, help="requests per client per run (default: 6)")
    parser.add_argument("--repeats", type=int, default=2, help="floor and served runs per client count")
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
        floor_rates, floor_tokens, served_rates, served_tokens, latencies, batches = [], [], [], [], [], []
        for _ in range(args.repeats):
            seconds, tokens = floor_run(server, bodies[:clients], args.max_tokens)
            floor_rates.append(clients / seconds)
            floor_tokens.append(tokens / seconds)
            before = len(server.batcher.sizes)
            seconds, times, tokens = served_elsewhere(port, bodies, clients, args.rounds, work)
            batches += [rows for _, rows in server.batcher.sizes[before:]]
            served_rates.append(len(times) / seconds)
            served_tokens.append(tokens / seconds)
            latencies += times
        latencies.sort()
        row = {
            "clients": clients,
            "floor_sequences_per_s": statistics.median(floor_rates),
            "served_requests_per_s": statistics.median(served_rates),
            "ratio": statistics.median(served_rates) / statistics.median(floor_rates),
            "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p95_ms": 1000 * latencies[max(0, round(0.95 * len(latencies)) - 1)],
            "floor_tokens_per_s": statistics.median(floor_tokens),
            "served_tokens_per_s": statistics.median(served_tokens),
            "rows_per_batch": statistics.mean(batches),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    stream_body = {"messages": [{"role": "user", "content": "Say something."}], "temperature": 0}
    stream_body["max_tokens"] = args.max_tokens
    to_first, to_end, pieces = first_chunk(port, stream_body)
    sizes = server.batcher.sizes
    httpd.shutdown()
    httpd.server_close()
    print(json.dumps({"stream_first_chunk_ms": 1000 * to_first, "stream_end_ms": 1000 * to_end, "chunks": pieces}))
    print(json.dumps({"largest_batch_rows": max(rows for _, rows in sizes)}))
    print(
        "\n| clients | floor sequences/s | served requests/s | served / floor | p50 ms | p95 ms "
        "| floor tokens/s | served tokens/s | rows a batch |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['clients']} | {row['floor_sequences_per_s']:.1f} | {row['served_requests_per_s']:.1f} | "
            f"{row['ratio']:.2f}x | {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | {row['floor_tokens_per_s']:.0f} | "
            f"{row['served_tokens_per_s']:.0f} | {row['rows_per_batch']:.1f} |"
        )
    print(f"\nStreamed: first content chunk at {1000 * to_first:.1f} ms of {1000 * to_end:.1f} ms ({pieces} chunks).")


if __name__ == "__main__":
    main()
