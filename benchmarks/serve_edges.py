"""The policy server at its edges (issue 53): /health while a huge request arrives, and a real
client while every connection the server takes is held by idle kept-alive clients trickling
their next request's headers.

    .venv/bin/python benchmarks/serve_edges.py [POLICY_DIR] [--megabytes 7] [--threads 1]

Without POLICY_DIR an untrained policy of the default format is built (a byte-level BPE of
2,048 tokens trained on the environment's task texts, the default 5M-parameter model): what is
measured is the HTTP side and the prompt's checks, not what the model says.

The server (training/policy/serving_http.py, as `manage.py serve_policy` runs it) serves on
127.0.0.1 in this process; the clients are this script again in another process (`--as-client`),
so their Python does not share the server's interpreter lock. Figures:

- /health latency (median, max) while idle, during one request of `--megabytes` MB of prompt
  (refused by its size, 400 context_length_exceeded), and during one request just under the
  byte cap (rendered and tokenized in a worker thread, then refused by its token count); the
  target is a max under 100 ms.
- 512 connections (MAX_CONNECTIONS) that made one request each and now send their next
  request's headers a byte at a time: a real client's status and latency (it was 503).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 100.0


def _health(port: int) -> float:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request("GET", "/health")
    status = connection.getresponse().status
    connection.close()
    if status != 200:
        raise RuntimeError(f"/health answered {status}")
    return time.monotonic() - started


def _post(port: int, body: bytes) -> tuple[int, dict, float]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer, time.monotonic() - started


def health_during(port: int, body: bytes | None) -> dict:
    """/health asked every 20 ms while `body` is posted (or for 2 s with none)."""
    answers: list = []
    if body is not None:
        busy = threading.Thread(target=lambda: answers.append(_post(port, body)))
        busy.start()
    latencies, started = [], time.monotonic()
    while (body is not None and busy.is_alive()) or (body is None and time.monotonic() - started < 2):
        latencies.append(_health(port))
        time.sleep(0.02)
    result = {"health_median_ms": 1000 * statistics.median(latencies), "health_max_ms": 1000 * max(latencies)}
    result["health_requests"] = len(latencies)
    if body is not None:
        busy.join()
        status, answer, seconds = answers[0]
        error = answer.get("error") or {}
        result |= {"status": status, "code": error.get("code"), "request_s": seconds, "body_mb": len(body) / 2**20}
    return result


def trickling(port: int, connections: int) -> dict:
    """A real client's answer while `connections` kept-alive connections trickle headers."""
    held = []
    for _ in range(connections):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.recv(65536)
        raw.sendall(b"G")
        held.append(raw)
    time.sleep(0.2)
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/v1/models")
    status = connection.getresponse().status
    connection.close()
    seconds = time.monotonic() - started
    for raw in held:
        raw.close()
    return {"trickling_connections": connections, "real_client_status": status, "real_client_ms": 1000 * seconds}


def _client(port: int, spec: dict) -> None:
    out = {"idle": health_during(port, None)}
    for name, size in spec["bodies"].items():
        message = "12 * 7 = ? "
        body = {"messages": [{"role": "user", "content": message * (size // len(message))}], "max_tokens": 4}
        out[name] = health_during(port, json.dumps(body).encode())
    out["trickling"] = trickling(port, spec["connections"])
    print(json.dumps(out))


def _untrained_policy(directory: Path) -> Path:
    from training.envs.registry import get_environment
    from training.policy.model_io import build_model, save_policy, train_tokenizer

    env = get_environment("arithmetic")
    texts = [json.dumps(env.opening_messages(task)) for task in env.tasks("train")]
    tokenizer = train_tokenizer(texts, vocab_size=2048)
    return save_policy(build_model(tokenizer), tokenizer, directory, tool_parser="compact")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-client":
        _client(int(sys.argv[2]), json.loads(sys.argv[3]))
        return
    from training.policy.serving import PolicyServer
    from training.policy.serving_http import MAX_CONNECTIONS, serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", nargs="?", default="")
    parser.add_argument("--megabytes", type=float, default=7.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    policy = Path(args.policy) if args.policy else _untrained_policy(Path(tempfile.mkdtemp()) / "untrained")
    server = PolicyServer(policy, name="bench", threads=args.threads)
    httpd = serve(server, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    spec = {
        "bodies": {"huge": int(args.megabytes * 2**20), "at_the_cap": server.max_prompt_bytes - 200},
        "connections": MAX_CONNECTIONS,
    }
    client = subprocess.run(
        [sys.executable, __file__, "--as-client", str(port), json.dumps(spec)], capture_output=True, text=True
    )
    httpd.shutdown()
    httpd.server_close()
    if client.returncode:
        raise SystemExit(client.stderr[-3000:])
    out = json.loads(client.stdout.strip().splitlines()[-1])
    out["max_prompt_bytes"] = server.max_prompt_bytes
    print(json.dumps(out, indent=1))
    for name in ("huge", "at_the_cap"):
        row = out[name]
        met = "met" if row["health_max_ms"] < TARGET_MS else "MISSED"
        print(
            f"{name}: a {row['body_mb']:.2f} MB request answered {row['status']} ({row['code']}) in "
            f"{row['request_s']:.2f} s; /health meanwhile median {row['health_median_ms']:.1f} ms, "
            f"max {row['health_max_ms']:.1f} ms over {row['health_requests']} requests "
            f"(target < {TARGET_MS:.0f} ms: {met})"
        )
    idle, held = out["idle"], out["trickling"]
    print(f"idle: /health median {idle['health_median_ms']:.1f} ms, max {idle['health_max_ms']:.1f} ms")
    print(
        f"{held['trickling_connections']} kept-alive connections trickling headers: a real client got "
        f"{held['real_client_status']} in {held['real_client_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
