"""A chat judge's run over a campaign against its floor: the same requests through the judge's
HTTP client alone.

    .venv/bin/python benchmarks/judge_run.py [--comparisons 300] [--repeats 3] [--concurrency 4] [--latency-ms 0]

The scratch database (`--database`, dropped and re-created) gets a campaign of
`--comparisons` comparisons, each of two 9-step trajectories (thoughts, tool calls, 600-character
observations) with a rubric dimension. An OpenAI-compatible server runs in this process on
127.0.0.1 (a free port) and answers every request with the same valid verdict and its usage,
after `--latency-ms` (0: the server costs nothing, so what is left is Arbiter's own cost).

Alternating, `--repeats` times each: (1) the floor: `ChatJudgeClient.ask_many` over the same
messages, built beforehand, with nothing done with the answers; (2) the app:
`judge_run_execute` as a worker runs it for a new judge: comparisons read in chunks, the
prompt built, each answer read by the people's rules (`judgement_parse`), its vote and its
audit record written. Reports the median wall time per comparison of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks._common import add_database_argument, ensure_bench_database

ROOT = Path(__file__).resolve().parent.parent

DIMENSIONS = [{"name": "correctness", "scale": 5, "description": "Is the answer right?", "required": True}]
ANSWER = {
    "rationale": "A reads the page it opened; B guesses.",
    "verdict": "A better",
    "both_bad": False,
    "ratings": {"correctness": {"A": 5, "B": 2}},
    "first_wrong_step_a": None,
    "first_wrong_step_b": 4,
}


def _server(latency: float):
    body = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": json.dumps(ANSWER)}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 60, "total_tokens": 1560},
        }
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as real servers (uvicorn, nginx): a kept-alive reply is not held 40 ms

        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers["Content-Length"]))
            if latency:
                time.sleep(latency)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _steps(i: int, side: str) -> list[dict]:
    page = f"Article {i}{side}: " + "The observatory was founded by an astronomer of the northern coast. " * 9
    steps = []
    for k in range(3):
        steps += [
            {"kind": "thought", "text": f"I should look up fact {k} of question {i}."},
            {"kind": "action", "tool": "search", "arguments": {"query": f"question {i} fact {k} {side}"}},
            {"kind": "observation", "tool": "search", "content": page[:600]},
        ]
    return steps


def build_campaign(n: int):
    from annotate.models import Campaign, Comparison, Policy, Task, Trajectory

    campaign = Campaign.objects.create(name="judge-bench", dimensions=DIMENSIONS, guidelines="Prefer read answers.")
    policy = Policy.objects.create(name="bench-agent")
    for i in range(n):
        task = Task.objects.create(external_id=f"q{i}", prompt=f"Who founded observatory {i}?", reference_answer="x")
        sides = [
            Trajectory.objects.create(
                task=task,
                policy=policy,
                steps=_steps(i, side),
                answer=f"answer {side}",
                content_hash=f"{i}{side}",
                num_steps=9,
            )
            for side in "ab"
        ]
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=sides[0], trajectory_b=sides[1])
    return campaign


def floor_items(campaign):
    """(key, messages) per comparison, as the app builds them, made before the clock starts."""
    from annotate.models import Comparison
    from training.judges.prompt import judge_messages, verdict_schema

    schema = verdict_schema(DIMENSIONS)
    items = []
    for c in Comparison.objects.filter(campaign=campaign).select_related("task", "trajectory_a", "trajectory_b"):
        items.append(
            (
                c.pk,
                judge_messages(
                    guidelines=campaign.guidelines,
                    dimensions=DIMENSIONS,
                    task_prompt=c.task.prompt,
                    first=(c.trajectory_a.steps, c.trajectory_a.answer),
                    second=(c.trajectory_b.steps, c.trajectory_b.answer),
                    schema=schema,
                ),
            )
        )
    return items, schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the server's own time per request")
    add_database_argument(parser)
    args = parser.parse_args()

    os.environ.update(ensure_bench_database(args.database))
    import django

    django.setup()
    from annotate.models import Judge, JudgeCall, JudgeVote
    from training.judges.chat import ChatJudgeClient, ChatJudgeSettings
    from training.judges.services import RunOptions, judge_run_execute

    campaign = build_campaign(args.comparisons)
    httpd, url = _server(args.latency_ms / 1000)
    config = {"base_url": url, "model": "bench", "concurrency": args.concurrency, "requests_per_minute": 0}
    items, schema = floor_items(campaign)
    floor, app = [], []
    try:
        for repeat in range(args.repeats):
            client = ChatJudgeClient(ChatJudgeSettings(**config), schema=schema)
            started = time.perf_counter()
            summary = client.ask_many(items, on_answer=lambda answer: None)
            floor.append(time.perf_counter() - started)
            assert summary["answered"] == args.comparisons, summary

            judge = Judge.objects.create(name=f"bench-judge-{repeat}", kind="chat", config=config)
            started = time.perf_counter()
            tally = judge_run_execute(
                judge=judge,
                campaign=campaign,
                options=RunOptions(swapped_share=0, repeat_share=0),
                run_id=None,
                progress=lambda done, total: None,
                should_stop=lambda: False,
            )
            app.append(time.perf_counter() - started)
            stored = JudgeVote.objects.filter(judge=judge).count()
            assert tally.voted == stored == args.comparisons, (tally, stored)
            assert JudgeCall.objects.filter(judge=judge).count() == args.comparisons
            print(
                f"repeat {repeat + 1}: client alone {1000 * floor[-1] / args.comparisons:.2f} ms a comparison, "
                f"judge run {1000 * app[-1] / args.comparisons:.2f} ms",
                flush=True,
            )
    finally:
        httpd.shutdown()
        httpd.server_close()
    f, a = statistics.median(floor), statistics.median(app)
    figures = {
        "comparisons": args.comparisons,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "floor_ms_per_comparison": round(1000 * f / args.comparisons, 3),
        "run_ms_per_comparison": round(1000 * a / args.comparisons, 3),
        "ratio": round(a / f, 2),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
