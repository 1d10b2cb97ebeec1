"""How long a judge run against a dead endpoint takes to fail (issue 53), against its target.

    .venv/bin/python benchmarks/judge_dead_endpoint.py [--comparisons 47] [--repeats 3] [--also-never]

A chat judge at its default settings (4 at once, 60 requests a minute, 4 retries with backoff,
giving up after 5 failed calls in a row) whose base URL is a port on 127.0.0.1 that nobody
listens on runs over a campaign of `--comparisons` comparisons (47, with the default probes:
about the 66 answers of the issue's run), launched and executed as a worker executes a run
(`run_launch`, then `run_execute` in this process) on the scratch database (`--database`,
dropped and re-created). Each repeat reports the wall time from launch to the run's end, its
status, the progress it stopped at, the calls made and the run's error; the target is a failed
run in under 30 s. `--also-never` runs the same once with `max_failures_in_a_row` 0 (never give
up: every answer tried 5 times, as before issue 53) on the first tenth of the comparisons, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

# Run as a script, its own folder is on the path (as the other benchmarks import it).
from benchmarks._common import add_database_argument, ensure_bench_database, free_port

TARGET_S = 30.0


def one_run(*, user, campaign, base_url: str, name: str, max_comparisons: int = 0, **settings) -> dict:
    """Launch and execute one judge run of a new judge; its figures."""
    from annotate.models import JudgeCall
    from training.judges.services import judge_create
    from webapp.models import Run
    from webapp.runs.services import run_execute, run_launch

    judge = judge_create(
        data={"name": name, "kind": "chat", "config": {"base_url": base_url, "model": "judge", **settings}},
        created_by=user,
    )
    started = time.perf_counter()
    run = run_launch(
        kind="judge",
        config={"judge_id": judge.pk, "campaign_id": campaign.pk, "max_comparisons": max_comparisons},
        user=user,
        enqueue=False,
    )
    run_execute(run_id=run.pk, attempt=run.attempt)
    took = time.perf_counter() - started
    run = Run.objects.get(pk=run.pk)
    return {
        "seconds": round(took, 2),
        "status": run.status,
        "progress": round(run.progress, 4),
        "calls": JudgeCall.objects.filter(run_id=run.pk).count(),
        "error": run.error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=47)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--also-never", action="store_true", help="also time one run that never gives up (before issue 53)"
    )
    add_database_argument(parser)
    args = parser.parse_args()

    os.environ.update(ensure_bench_database(args.database))
    # The dead endpoint is on 127.0.0.1, where a local model server would be (the embedded default allows it).
    os.environ.setdefault("JUDGE_ALLOW_PRIVATE_ADDRESSES", "true")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from annotate.models import JudgeVote
    from benchmarks.judge_run import build_campaign
    from training.judges.run_kind import JudgeRunConfig
    from training.judges.services import campaign_comparison_ids, probe_drawn

    user = get_user_model().objects.create(username="bench-admin")
    campaign = build_campaign(args.comparisons)
    options = JudgeRunConfig().options()
    answers = sum(
        1
        + probe_drawn(options.seed, cid, JudgeVote.Probe.SWAPPED, options.swapped_share)
        + probe_drawn(options.seed, cid, JudgeVote.Probe.REPEAT, options.repeat_share)
        for cid in campaign_comparison_ids(campaign, options)
    )
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: every connection is refused
    print(f"{args.comparisons} comparisons, {answers} answers wanted; the judge's endpoint {dead} is dead", flush=True)

    runs = []
    for repeat in range(args.repeats):
        figures = one_run(user=user, campaign=campaign, base_url=dead, name=f"dead-{repeat}")
        runs.append(figures)
        print(
            f"repeat {repeat + 1}: {figures['status']} after {figures['seconds']:.1f} s, at "
            f"{100 * figures['progress']:.1f}%, {figures['calls']} calls: {figures['error']}",
            flush=True,
        )
    never = None
    if args.also_never:
        tenth = max(1, args.comparisons // 10)
        never = one_run(
            user=user, campaign=campaign, base_url=dead, name="never", max_comparisons=tenth, max_failures_in_a_row=0
        )
        print(
            f"never giving up, {tenth} comparisons: {never['status']} after "
            f"{never['seconds']:.1f} s, {never['calls']} calls",
            flush=True,
        )
    seconds = [r["seconds"] for r in runs]
    met = all(r["status"] == "failed" and r["seconds"] < TARGET_S and r["progress"] < 1 for r in runs)
    print("" if met else f"MISS: a run did not fail within {TARGET_S:g} s below 100%", flush=True)
    print(
        json.dumps(
            {
                "comparisons": args.comparisons,
                "answers_wanted": answers,
                "median_s": statistics.median(seconds),
                "max_s": max(seconds),
                "calls": [r["calls"] for r in runs],
                "progress": [r["progress"] for r in runs],
                "statuses": [r["status"] for r in runs],
                "target_s": TARGET_S,
                "met": met,
                "never_gives_up": never,
            }
        )
    )


if __name__ == "__main__":
    main()
