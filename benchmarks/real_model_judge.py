"""A served policy as a chat judge of the demo campaign, against the campaign's votes and beside
the rubric (the oracle) and a coin.

    .venv/bin/python benchmarks/real_model_judge.py --policy POLICY_DIR [--comparisons 40]
        [--max-tokens 256] [--concurrency 4] [--threads 2] [--database NAME] [--json FILE]

The scratch database (`--database`, dropped and re-created) gets the demo campaign "Demo:
simulated labels" built as `manage.py load_demo` builds it (scripted trajectories of a careful
and a hasty agent, three votes per comparison from **simulated annotators**, not people: the
agreement below is with them). The policy is served in this process as `manage.py
serve_policy` serves it (training/policy/serving_http.py, 127.0.0.1, a free port) and
registered as a `chat` judge of that address with the product's defaults but for `max_tokens`,
`temperature` 0 and no request limit; `judge_run_execute` asks it about the first
`--comparisons` comparisons (no probes), as a `judge` run on a worker does. The same
comparisons are judged by the rubric judge and by a coin (a seeded random judge of the same
choices), and the quality panel's figures (annotate/judges/quality.py) are printed for each:
accuracy and Cohen's kappa against the majority of the votes, each with its 95% interval, how
many comparisons each answered, and the votes' own leave-one-out agreement (the ceiling).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from benchmarks._common import (  # first: the project on the path
    add_database_argument,
    ensure_bench_database,
    markdown_table,
)


def serve_in_thread(policy_dir: str, threads: int):
    from training.policy.serving import PolicyServer
    from training.policy.serving_http import serve

    httpd = serve(PolicyServer(policy_dir, name="judge-model", threads=threads), "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def coin_votes(judge, campaign, ids: list[int], seed: int) -> None:
    """A judge that answers at random, for chance agreement on the same comparisons."""
    from annotate.models import JudgeVote

    rng = random.Random(seed)
    JudgeVote.objects.bulk_create(
        [
            JudgeVote(judge=judge, comparison_id=i, probe=JudgeVote.Probe.FIRST, choice=rng.randint(1, 5), ratings={})
            for i in ids
        ]
    )


def figures_of(panel: dict) -> dict:
    overall = next(d for d in panel["dimensions"] if d["dimension"] == "overall")
    return {"answered": panel["answered"], **overall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="the policy's directory (a registered model's)")
    parser.add_argument("--comparisons", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="")
    add_database_argument(parser)
    args = parser.parse_args()

    os.environ.update(ensure_bench_database(args.database))
    os.environ["JUDGE_ALLOW_PRIVATE_ADDRESSES"] = "true"  # the model is served on this machine
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from annotate.judges.quality import campaign_judge_panels
    from annotate.models import Judge, JudgeCall
    from training.judges.services import RunOptions, campaign_comparison_ids, judge_run_execute
    from training.management.commands.load_demo import simulated_campaign_make

    admin = get_user_model().objects.create(username="bench-admin")
    _, labels, snapshot = simulated_campaign_make(admin)
    campaign = snapshot.campaigns.get()
    options = RunOptions(swapped_share=0, repeat_share=0, max_comparisons=args.comparisons)
    ids = campaign_comparison_ids(campaign, options)
    print(f"{campaign.name}: {labels} simulated votes; judging {len(ids)} comparisons", flush=True)

    httpd, url = serve_in_thread(args.policy, args.threads)
    config = {
        "base_url": url,
        "model": "judge-model",
        "temperature": 0,
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "requests_per_minute": 0,
        "timeout_s": 900,
    }
    model_judge = Judge.objects.create(name=f"served {Path(args.policy).name}", kind="chat", config=config)
    rubric = Judge.objects.create(name="rubric (oracle)", kind="rubric", config={})
    coin = Judge.objects.create(name="coin (chance)", kind="chat", config={"base_url": url, "model": "none"})
    timings = {}
    try:
        for judge in (rubric, model_judge):
            started = time.monotonic()
            tally = judge_run_execute(
                judge=judge,
                campaign=campaign,
                options=options,
                run_id=None,
                progress=lambda done, total: None,
                should_stop=lambda: False,
            )
            timings[judge.name] = round(time.monotonic() - started, 1)
            print(f"{judge.name}: {tally} in {timings[judge.name]} s", flush=True)
    finally:
        httpd.shutdown()
        httpd.server_close()
    coin_votes(coin, campaign, ids, args.seed)
    statuses = dict(Counter(JudgeCall.objects.filter(judge=model_judge).values_list("status", flat=True)))
    panels = {p.name: figures_of(asdict(p)) for p in campaign_judge_panels(campaign=campaign)}
    rows = []
    for name, f in panels.items():
        vs, ceiling = f["vs_humans"], f["ceiling"]
        rows.append(
            [
                name,
                f["answered"],
                vs["n"],
                _cell(vs.get("accuracy")),
                _cell(vs.get("kappa")),
                _cell(ceiling.get("accuracy")),
                timings.get(name, ""),
            ]
        )
    print(
        markdown_table(
            ["judge", "answered", "n with a majority", "accuracy", "kappa", "votes' own (leave one out)", "seconds"],
            rows,
        )
    )
    print(f"the served model's calls: {statuses}")
    if args.json:
        Path(args.json).write_text(json.dumps({"panels": panels, "calls": statuses, "seconds": timings}, default=str))


def _cell(value) -> str:
    if not isinstance(value, dict) or value.get("value") is None:
        return "-"
    low, high = value.get("low"), value.get("high")
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{value['value']:.2f}{interval}"


if __name__ == "__main__":
    main()
