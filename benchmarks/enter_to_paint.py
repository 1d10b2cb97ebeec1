"""What an annotator feels: from pressing Enter to the next comparison painted, in Chromium,
while 32 other annotators label through the API at the same time.

    .venv/bin/python benchmarks/enter_to_paint.py [--cycles 150] [--annotators 32] [--pace 1.0]
        [--worker-class gthread --workers 4 --threads 2] [--server-env DB_POOL=true] [--port N]

One gunicorn on 127.0.0.1 (`--port`, else $ARBITER_BENCH_PORT, else a free port) serves the
scratch PostgreSQL database (`--database`, dropped and re-created at start) with the labeling
benchmark's campaign (benchmarks/labeling_cycle.py: 20,000 comparisons, k = 3). In the
background, the load benchmark's clients (4 processes, one thread per annotator) loop
next + submit over the API, each pausing a random 0-2 s between cycles. In the foreground
a headless Chromium (Playwright, /usr/bin/chromium) signed in as one more annotator
labels with the keyboard: `1`, then Enter. The page records `performance.now()` at the
Enter keydown and again two animation frames after htmx swapped in the next comparison
(the frame after the swap has been painted). Reported: p50, p95 and max of that time over
the cycles after a warm-up of 10, and the background clients' cycles per second.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Run as a script, its own folder is on the path (as the other benchmarks import it).
from benchmarks import labeling_cycle
from benchmarks._common import ROOT, ensure_bench_database, free_port, gunicorn_stop

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "enter-to-paint-1"
WARMUP = 10

# Installed in the page: times each Enter to the paint after the next comparison arrives.
PROBE = """
window.__paint = [];
document.addEventListener("keydown", (ev) => { if (ev.key === "Enter") window.__enterAt = performance.now(); }, true);
document.body.addEventListener("htmx:afterSwap", () => {
  const start = window.__enterAt;
  if (start === undefined) return;
  requestAnimationFrame(() => requestAnimationFrame(() => window.__paint.push(performance.now() - start)));
  window.__enterAt = undefined;
});
"""


def browser_user() -> None:
    """Runs in a child with Django: an annotator who signs in with a password."""
    import django

    django.setup()
    from webapp.models import User
    from webapp.roles import Role, user_role_set

    user, _ = User.objects.get_or_create(username="paint-annotator")
    user.set_password(PASSWORD)
    user.save()
    user_role_set(user=user, roles=[Role.ANNOTATOR])


def background(port, tokens, campaign, stop_at, pace, queue) -> None:
    labeling_cycle.worker("cycle", port, tokens, campaign, stop_at, 0.0, pace, queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=150)
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--pace", type=float, default=1.0, help="mean pause of the background clients, seconds")
    parser.add_argument(
        "--comparisons",
        type=int,
        default=20_000,
        help="comparisons in the campaign; enough that no annotator runs out (default: 20000)",
    )
    labeling_cycle.add_server_arguments(parser)
    parser.add_argument("--browser-user", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.browser_user:
        browser_user()
        return

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium")
    env = ensure_bench_database(args.database)
    setup = json.loads(
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks/labeling_cycle.py"),
                "--setup-child",
                "--annotators",
                str(args.annotators),
                "--comparisons",
                str(args.comparisons),
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    campaign = setup["campaigns"][0]  # the setup makes a few; one is labelled here
    subprocess.run([sys.executable, __file__, "--browser-user"], cwd=ROOT, env=env, check=True)
    port = args.port or free_port()
    server = labeling_cycle.serve(env, port, args)
    procs = []
    try:
        stop_at = time.perf_counter() + 3600
        queue = mp.Queue()
        chunks = [setup["tokens"][i :: labeling_cycle.PROCESSES] for i in range(labeling_cycle.PROCESSES)]
        started = time.perf_counter()
        procs = [mp.Process(target=background, args=(port, c, campaign, stop_at, args.pace, queue)) for c in chunks]
        for p in procs:
            p.start()
        times = measure(port, campaign, args.cycles)
        for p in procs:
            p.terminate()
        elapsed = time.perf_counter() - started
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        gunicorn_stop(server)
    done = background_cycles(campaign, env)
    q = statistics.quantiles(times, n=100)
    print(
        json.dumps(
            {
                "p50_ms": q[49],
                "p95_ms": q[94],
                "max_ms": max(times),
                "n": len(times),
                "background_cycles_per_s": done / elapsed,
            }
        )
    )
    print(
        f"\nEnter -> next comparison painted, {len(times)} cycles in Chromium beside {args.annotators} API "
        f"annotators (0-{2 * args.pace:g} s pauses), gunicorn {args.worker_class} {args.workers}x{args.threads} "
        f"{' '.join(args.server_env)}:"
    )
    print("| p50 ms | p95 ms | max ms | background cycles/s |")
    print("|---|---|---|---|")
    print(f"| {q[49]:.0f} | {q[94]:.0f} | {max(times):.0f} | {done / elapsed:.1f} |")


def measure(port: int, campaign: int, cycles: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    navigations: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", "paint-annotator")
        page.fill("input[name=password]", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/")
        page.goto(f"{base}/annotate/campaigns/{campaign}/label/")
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        page.evaluate(PROBE)
        for i in range(cycles + WARMUP):
            page.keyboard.press("1")
            page.keyboard.press("Enter")
            deadline = time.perf_counter() + 30
            while (
                page.evaluate("window.__paint ? window.__paint.length : -1") <= i
            ):  # the page's CSP forbids wait_for_function's eval
                if time.perf_counter() > deadline:
                    page.screenshot(path=str(ROOT / "test-output" / "enter-to-paint-timeout.png"))
                    raise TimeoutError(
                        f"cycle {i}: no next comparison within 30 s (navigations: {navigations}); "
                        f"the page says: "
                        f"{page.locator('main').inner_text()[:300]!r}"
                    )
                time.sleep(0.005)
        times = page.evaluate("window.__paint")
        if navigations:
            raise RuntimeError(f"the page reloaded instead of swapping: {navigations[:3]}")
        browser.close()
    return times[WARMUP:]


def background_cycles(campaign: int, env: dict) -> int:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'arbiter.settings'); django.setup();"
                "from annotate.models import Judgement;"
                f"print(Judgement.objects.filter(comparison__campaign_id={campaign})"
                ".exclude(annotator__username='paint-annotator').count())"
            ),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
