"""Every benchmark script at a tiny size, run as a user runs it (`python benchmarks/x.py ...` in
a fresh process), so that none can rot unnoticed: each must finish and print its figures. The
figures themselves are not checked against anything (benchmarks/RESULTS.md holds them).

tests/benchmarks/test_loop_benchmarks.py covers gae_speed, loop_heldout's plain run, soak_embedded,
import_traces and mcp_call_cost; this file covers the others (loop_heldout's habit situations,
best temperature and pass@k among them), and checks that no script is
left without a smoke test. Scripts on PostgreSQL work on their scratch database, named after
this run's database and its xdist worker (`arbiter_bench_gw0`: tests_env.py; they drop and
re-create it; never the run's own database); api_fuzz on `test_arbiter_fuzz_gw0` and
suite_times on `test_arbiter_suite_smoke_gw0`, which pytest-django makes and drops; and
reward_model_probes, which reads an existing snapshot, on this test's own database.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.intervals import share_interval
from tests.policy_fixtures import tiny_policy_dir
from tests_env import SUFFIX
from training.envs.base import FRESH_WORLD_SEED

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
TINY_RM = '{"hidden": 32, "layers": 1, "heads": 2, "max_length": 256, "batch_size": 16, "epochs": 1}'


@pytest.fixture
def bench():
    """Run a script in a fresh process as a user does (`python benchmarks/x.py ...`); its stdout.

    A fixture rather than a helper, so that tests/conftest.py sees the subprocess.run( below and
    marks every test that uses it slow."""

    def run(*args: str, timeout: int = 120, env: dict | None = None) -> str:
        done = subprocess.run(
            [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
        assert done.returncode == 0, (
            f"{args[0]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout

    return run


def _table_rows(out: str, first_cell: str = "") -> list[list[str]]:
    """The cells of the markdown tables' data rows (headers and rules left out) whose first cell
    starts with `first_cell`."""
    rows: list[list[str]] = []
    for line in out.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if all(set(c) <= {"-"} for c in cells):
            rows.pop()  # the header above this rule
        else:
            rows.append(cells)
    return [r for r in rows if r[0].startswith(first_cell)]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory) -> str:
    return str(tiny_policy_dir(tmp_path_factory.mktemp("bench") / "policy"))


def test_every_benchmark_script_has_a_smoke_test():
    scripts = {p.stem for p in BENCHMARKS.glob("*.py") if not p.stem.startswith("_")}
    smoke = Path(__file__).read_text() + (Path(__file__).parent / "test_loop_benchmarks.py").read_text()
    run_here = set(re.findall(r"\"benchmarks/(\w+)\.py\"", smoke))
    assert scripts - run_here == set(), "benchmark scripts with no smoke test"


def test_a_script_that_drops_a_database_says_so_in_its_help(bench):
    droppers = [p for p in BENCHMARKS.glob("*.py") if "ensure_bench_database(" in p.read_text() and p.stem != "_common"]
    assert len(droppers) >= 6
    for script in [*droppers, BENCHMARKS / "api_fuzz.py"]:
        help_text = " ".join(bench(str(script.relative_to(ROOT)), "--help").split())
        assert "--database NAME" in help_text and "DROPS" in help_text, script.name


def test_a_scratch_database_that_no_benchmark_made_is_refused_not_dropped():
    # The run's own database, named as the scratch one: refused before anything is dropped.
    own = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
    done = subprocess.run(
        [sys.executable, "benchmarks/import_trajectories.py", "--sizes", "4", "--database", own],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "cannot be DATABASE_URL's own database" in done.stderr


def test_export_judgements_fills_through_the_models_and_exports_every_judgement(bench):
    out = bench("benchmarks/export_judgements.py", "--sizes", "400", "--repeats", "1")
    assert "filled 400 judgements" in out
    [row] = _table_rows(out, "400")
    assert row[5].endswith("x") and row[6].endswith("x") and float(row[7]) > 0  # export / each floor, peak RSS


def test_admin_pages_times_each_page_through_gunicorn_idle_and_loaded(bench, tmp_path):
    out = bench(
        "benchmarks/admin_pages.py",
        *"--comparisons 6 --annotators 3 --eval-tasks 1 --repeats 1 --load 1 --workers 1 --threads 2".split(),
        "--profile",
        str(tmp_path),
        timeout=300,
    )
    rows = {r[0]: r for r in _table_rows(out)}
    assert set(rows) == {
        "floor: GET /health",
        "quality page",
        "judge page",
        "evaluation page",
        "download (new snapshot)",
        "download (again)",
    }
    assert all(float(cell) > 0 for row in rows.values() for cell in row[1:])  # idle and loaded, median and max
    assert "SQL queries" in (tmp_path / "admin_pages-quality.txt").read_text()


def test_import_trajectories_imports_every_line(bench):
    out = bench("benchmarks/import_trajectories.py", "--sizes", "40", "--repeats", "1")
    [row] = _table_rows(out, "40")
    assert row[5].endswith("x")  # import / floor


def test_campaign_fill_fills_with_both_strategies(bench):
    out = bench("benchmarks/campaign_fill.py", "--sizes", "40", "--repeats", "1")
    rows = _table_rows(out, "40")
    assert [r[1] for r in rows] == ["all_pairs", "policy_vs_policy"]
    assert all(int(r[2]) > 0 for r in rows)  # comparisons made


def test_labeling_cycle_serves_annotators_on_a_port_of_its_own(bench):
    out = bench(
        "benchmarks/labeling_cycle.py",
        *"--annotators 2 --seconds 1 --warmup 0.2 --rounds 1 --comparisons 500 --workers 1 --threads 2".split(),
    )
    rows = {r[0]: r for r in _table_rows(out)}
    cycle = rows["next + submit, no pause (cycles)"]
    assert float(cycle[1]) > 0 and cycle[4] == "0"  # cycles per second, no failed request
    floor = rows["floor: the same statements from a psycopg loop, no pause (cycles)"]
    assert float(floor[1]) > 0 and floor[4] == "0"
    assert float(rows["floor, no pause"][3]) > 0  # CPU per cycle
    assert "cycle throughput / trivial throughput" in out and "server CPU per cycle / floor's" in out


@pytest.mark.browser
def test_enter_to_paint_times_the_keyboard_in_chromium_beside_api_annotators(bench):
    out = bench(
        "benchmarks/enter_to_paint.py", *"--cycles 3 --annotators 2 --comparisons 200 --workers 1 --threads 2".split()
    )
    figures = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert figures["n"] == 3 and figures["p50_ms"] > 0


@pytest.mark.worker
def test_first_run_starts_the_embedded_app_and_stops_it_with_ctrl_c(bench):
    out = bench("benchmarks/first_run.py", "--repeats", "1", timeout=240)
    figures = json.loads(out.splitlines()[0])
    assert figures["web_s"] > 0 and figures["stop_s"] > 0 and figures["leftover_processes"] == []
    assert out.splitlines()[-1].startswith("medians over 1 repeat(s)")


def test_api_fuzz_counts_the_answers_of_the_operations_it_fuzzes(bench):
    out = bench("benchmarks/api_fuzz.py", "--examples", "1", "--only", "whoami")
    assert re.search(r"^\d+ requests in \d+ s .*; server errors: 0$", out, re.MULTILINE), out[-500:]


def test_json_input_check_times_both_decoders(bench):
    out = bench("benchmarks/json_input_check.py", "--lines", "20", "--repeats", "1")
    assert [r[0] for r in _table_rows(out)] == ["20 canonical", "20 otel"]


def test_bc_policy_clones_and_evaluates_a_tiny_policy(bench, tmp_path):
    tiny = "extra_worlds=0 max_steps=2 hidden=32 layers=1 heads=2 vocab_size=300 warmup_steps=1 batch_size=4"
    out = bench("benchmarks/bc_policy.py", "--split", "dev", "--save", str(tmp_path / "bc"), "--set", *tiny.split())
    assert re.search(r"^RESULT dev \(\d+ tasks\): greedy [\d.]+% .* 2 steps;", out, re.MULTILINE)
    assert (tmp_path / "bc" / "config.json").exists()


def test_bc_policy_clones_into_a_pretrained_chat_model_with_lora(bench, tmp_path):
    from tests.training.chat_models import chat_model_dir
    from training.envs.registry import get_environment

    base = chat_model_dir(tmp_path / "qwen", "qwen2", [get_environment("encyclopedia")])
    tiny = "extra_worlds=0 max_steps=2 warmup_steps=1 batch_size=4 dev_every=0 lora_rank=4"
    out = bench(
        "benchmarks/bc_policy.py",
        "--base",
        str(base),
        "--split",
        "none",
        "--save",
        str(tmp_path / "bc"),
        "--set",
        *tiny.split(),
    )
    assert re.search(r"M parameters, 0\.\d+M trained;", out) and "RESULT no evaluation; 2 steps" in out
    assert json.loads((tmp_path / "bc" / "config.json").read_text())["model_type"] == "qwen2"


def test_real_model_judge_judges_the_demo_campaign_beside_the_rubric_and_a_coin(bench, policy_dir, tmp_path):
    out = bench(
        "benchmarks/real_model_judge.py",
        "--policy",
        policy_dir,
        "--comparisons",
        "3",
        "--max-tokens",
        "8",
        "--json",
        str(tmp_path / "judge.json"),
        timeout=240,
    )
    figures = json.loads((tmp_path / "judge.json").read_text())
    assert set(figures["panels"]) >= {"rubric (oracle)", "coin (chance)"} and "| judge |" in out
    assert figures["panels"]["coin (chance)"]["answered"] == 3 and sum(figures["calls"].values()) >= 3


def test_bc_parallel_trains_in_one_process_and_in_two(bench):
    tiny = "extra_worlds=0 hidden=32 layers=1 heads=2 vocab_size=300 warmup_steps=1 batch_size=4"
    out = bench("benchmarks/bc_parallel.py", "--steps", "3", "--repeats", "1", "--set", *tiny.split(), timeout=300)
    assert [r[0] for r in _table_rows(out)] == ["1 (2 threads)", "2 (1 thread each, gloo)"]
    gap = re.search(r"^RESULT largest weight difference (\S+), end-loss difference (\S+)$", out, re.MULTILINE)
    assert gap and float(gap[1]) < 1e-3 and float(gap[2]) < 1e-3


def test_rl_compare_trains_a_variant_and_evaluates_it(bench, policy_dir):
    tiny = (
        "iterations=1 episodes_per_iteration=4 minibatch_size=4 epochs=1 eval_every=1 eval_samples=1 "
        "eval_greedy=false dev_tasks=8 rollout_batch_size=8 max_action_tokens=16"
    )
    out = bench("benchmarks/rl_compare.py", policy_dir, "--variant", "ppo: lam=0.95", "--set", *tiny.split())
    figures = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert figures["iterations"] == 1 and figures["dev"]
    assert re.search(r"^ppo, 0 \| ", out, re.MULTILINE)


def test_serve_policy_times_the_server_against_generation_in_process(bench, policy_dir):
    out = bench("benchmarks/serve_policy.py", policy_dir, "--requests", "2", "--max-tokens", "4", "--threads", "1")
    figures = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert figures["requests"] == 2 and figures["served_median_ms"] > 0 and figures["ratio"] > 0


def test_serve_concurrent_times_concurrent_clients_against_one_padded_generate(bench, policy_dir):
    tiny = "--clients 1 2 --rounds 2 --repeats 2 --stream-clients 1 2 --max-tokens 4 --threads 1"
    out = bench("benchmarks/serve_concurrent.py", policy_dir, *tiny.split())
    rows = [json.loads(line) for line in out.splitlines() if line.startswith('{"clients"')]
    assert [r["clients"] for r in rows] == [1, 2]
    assert all(r["served_requests_per_s"] > 0 and r["floor_sequences_per_s"] > 0 for r in rows)
    assert all(len(r["ratios"]) == 2 and r["min_ratio"] == min(r["ratios"]) for r in rows)  # each repeat, and the least
    streams = [json.loads(line) for line in out.splitlines() if line.startswith('{"stream"')]
    assert [(s["stream"], s["clients"]) for s in streams] == [
        ("text", 1),
        ("tool call", 1),
        ("text", 2),
        ("tool call", 2),
    ]
    assert all(0 < s["fraction"] <= s["worst_fraction"] <= 1 for s in streams)
    assert len(_table_rows(out, "stream: ")) == 4 and len(_table_rows(out)) == 6
    assert "Streamed: first content chunk" in out


def test_serve_edges_times_health_beside_a_huge_request_and_a_client_beside_idle_connections(bench, policy_dir):
    out = bench("benchmarks/serve_edges.py", policy_dir, "--megabytes", "1")
    assert re.search(r"^huge: a 1\.00 MB request answered 400 \(context_length_exceeded\)", out, re.MULTILINE), out
    assert re.search(r"^512 kept-alive connections trickling headers: a real client got 200", out, re.MULTILINE), out


def test_rollout_throughput_compares_the_rollout_with_generate(bench, policy_dir):
    tiny = "--batch 2 --tasks 2 --repeats 1 --threads 1"
    out = bench("benchmarks/rollout_throughput.py", "--policy", policy_dir, *tiny.split())
    [row] = _table_rows(out, "this rollout")
    assert float(row[2]) > 0 and float(row[4]) > 0  # rollout tokens/s, rollout / generate


def _situation_counts(cells: dict) -> dict[str, int]:
    return {name: cell["n"] for name, cell in cells["situations"].items()}


def test_loop_heldout_reports_each_habit_situation_the_best_temperature_and_pass_at_k(bench, policy_dir, tmp_path):
    report = tmp_path / "report.json"
    out = bench(
        "benchmarks/loop_heldout.py",
        *("--policy", f"start={policy_dir}", "--policy", f"again={policy_dir}", "--worlds", "10001", "--tasks", "12"),
        *("--temperatures", "0.5", "0.3", "--temperature-tasks", "6", "--pass-at", "1", "2", "--json", str(report)),
    )
    figures = json.loads(report.read_text())
    # The temperature is chosen on the fresh world, greedy among the candidates, the best dev
    # success winning and a tie going to the lower temperature.
    choice = figures["temperature_choice"]
    assert choice["world"] == FRESH_WORLD_SEED and choice["tasks"] == 6
    dev = {float(t): cells["success"][0] for t, cells in choice["candidates"].items()}
    assert list(dev) == [0.0, 0.3, 0.5] and choice["chosen"] == min(t for t in dev if dev[t] == max(dev.values()))
    world = figures["10001"]
    start, again = world["policies"]["start"], world["policies"]["again"]
    # 12 tasks taken across kinds hold a habit's situation (the first 12 by id hold one kind);
    # each situation's success is a share with its Wilson interval.
    situations = _situation_counts(start["greedy"])
    assert {"headquarters_first_page", "other"} <= set(situations)
    assert sum(situations.values()) == start["greedy"]["n"] == world["tasks"] == 12
    for cell in [start["t1"], *start["t1"]["situations"].values()]:
        share, low, high = cell["success"]
        assert (low, high) == pytest.approx(share_interval(share * cell["n"], cell["n"]))
    # The same policy on the same seeds: no gain in any situation, greedy or at T=1.
    for mode in ("greedy", "t1"):
        cells = [again[mode], *again[mode]["situations"].values()]
        assert [c["gain"][0] for c in cells] == [0.0] * (1 + len(situations))
    best = world["best_temperature"]
    assert best["temperature"] == choice["chosen"] and _situation_counts(best) == situations
    assert _situation_counts(best["greedy_gain_over_it"]["again"]) == situations
    # pass@k per situation from 2 samples a task; pass@2 is never below pass@1.
    passes = again["pass_at_k"]
    assert passes["samples"] == 2 and _situation_counts(passes) == situations
    for cell in [passes, *passes["situations"].values()]:
        assert 0.0 <= cell["pass@1"][0] <= cell["pass@2"][0] <= 1.0
    # The tables: per policy a line overall and one per situation.
    assert [row[1] for row in _table_rows(out, "again") if len(row) == 8] == ["overall", *situations]
    assert [row[1] for row in _table_rows(out, "again greedy")] == ["overall", *situations]
    temperatures = [row for row in _table_rows(out) if len(row) == 4 and row[3] in ("yes", "")]
    assert [row[0] for row in temperatures] == ["0 (greedy)", "0.3", "0.5"]
    assert [row[3] for row in temperatures].count("yes") == 1


def test_reachability_measures_pass_at_k_per_situation_on_the_fresh_world_or_unseen_ones(bench, policy_dir, tmp_path):
    report = tmp_path / "reach.json"
    args = ("benchmarks/reachability.py", policy_dir, "--pass-at", "1", "3", "--tasks", "6", "--json", str(report))
    out = bench(*args)
    figures = json.loads(report.read_text())[str(FRESH_WORLD_SEED)]
    assert figures["tasks"] == 6 and figures["samples"] == 3 and figures["temperature"] == 1.0
    assert sum(_situation_counts(figures).values()) == 6 and "headquarters_first_page" in figures["situations"]
    assert [row[1] for row in _table_rows(out, "policy")] == ["overall", *figures["situations"]]
    assert f"the fresh world (seed {FRESH_WORLD_SEED})" in out
    bench(*args, "--worlds", "10001", "10002")
    assert set(json.loads(report.read_text())) == {"10001", "10002"}


def test_demonstrators_plays_each_named_demonstrator_per_habit_situation(bench, tmp_path):
    report = tmp_path / "demonstrators.json"
    out = bench("benchmarks/demonstrators.py", "--worlds", "0", "10001", "--size", "12,30,10", "--json", str(report))
    figures = json.loads(report.read_text())
    assert set(figures) == {"habits", "random", "clean"}
    employer = figures["habits"]["10001"]["decoy_on_top"]
    assert employer["n"] > 0 and employer["right"] == 0  # the habit that is never right
    assert figures["clean"]["0"]["all"]["right"] == figures["clean"]["0"]["all"]["n"]
    assert re.search(r"^  world 10001: all \d+/\d+ ", out, re.MULTILINE)


def test_unseen_world_scores_a_policy_on_both_worlds(bench, policy_dir):
    out = bench("benchmarks/unseen_world.py", policy_dir)
    assert re.search(r"^encyclopedia eval \(\d+ tasks\), .*: greedy", out, re.MULTILINE)
    assert re.search(r"^encyclopedia-unseen eval \(\d+ tasks\), .*: greedy", out, re.MULTILINE)


def test_reward_model_train_against_plain_trl_and_its_learning_curve(bench):
    tiny = ["--set", "epochs=1", "hidden=32", "layers=1", "heads=2", "max_length=256"]
    out = bench("benchmarks/reward_model_train.py", "--tasks", "6", "--repeats", "1", *tiny, timeout=180)
    assert re.search(r"^median wall time: plain TRL [\d.]+ s, Arbiter run [\d.]+ s, ratio", out, re.MULTILINE)
    out = bench("benchmarks/reward_model_train.py", "--reuse", "--curve", "--sizes", "20", "--seeds", "0", *tiny)
    assert re.search(r"^\s+20  [\d.]+  [\d.]+$", out, re.MULTILINE)


def test_judge_routing_runs_both_arms_to_finite_accuracies(bench, tmp_path):
    out = bench("benchmarks/judge_routing.py", "--tiny", "--out", str(tmp_path / "routing.json"), timeout=180)
    figures = json.loads((tmp_path / "routing.json").read_text())
    assert set(figures["arms"]) == {"random", "disagreement"}
    for arm in figures["arms"].values():
        assert [p["labels"] for p in arm["curve"]] == [8, 16]
        assert all(math.isfinite(p["mean"]) for p in arm["curve"])
        assert arm["spent"]["labels"] == 8  # one round's batch chosen after the start
    assert [r[0] for r in _table_rows(out) if r[0] in ("random", "disagreement")] == ["random", "disagreement"]


@pytest.mark.django_db(transaction=True)
def test_reward_model_probes_trains_a_variant_and_probes_it(bench):
    from django.conf import settings

    from tests.rewardmodel.rm_fixtures import simulated_snapshot, tiny_policy

    policy, snapshot = tiny_policy(), simulated_snapshot(tasks=20)
    db = settings.DATABASES["default"]  # this test's database, where the snapshot is
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    base = ["benchmarks/reward_model_probes.py", "--snapshot", str(snapshot.pk), "--policy", str(policy.pk)]
    out = bench(*base, "--variant", f"tiny: {TINY_RM}", env=env, timeout=180)
    assert re.search(r"^tiny \| 1 \| [\d.]+% \|", out, re.MULTILINE)
    out = bench(*base, "--variant", f"tiny: {TINY_RM}", "--curve", "20", env=env, timeout=180)
    assert re.search(r"^tiny \| 20 \| [\d.]+ \(", out, re.MULTILINE)


@pytest.mark.parametrize("kind, lora_rank", [("dpo", "2"), ("sft", "0")])
def test_finetune_speed_times_a_run_against_plain_trl(bench, policy_dir, kind, lora_rank):
    out = bench(
        "benchmarks/finetune_speed.py",
        policy_dir,
        "--kind",
        kind,
        "--lora-rank",
        lora_rank,
        "--rows",
        "4",
        "--steps",
        "2",
        "--batch",
        "2",
        "--repeats",
        "1",
    )
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["ratio"] > 0 and figures["arbiter"]["peak_rss_mb"] > 0
    assert re.search(r"^\| floor \| [\d.]+ \|", out, re.MULTILINE)


@pytest.mark.django_db(transaction=True)
def test_compare_dpo_reads_the_loops_head_to_head_and_pools_them(bench, tmp_path):
    from django.conf import settings

    from tests.factories import PolicyFactory
    from tests.helpers import Built
    from training.models import EvaluationEntry, EvaluationEpisode, LoopRound

    built = Built()
    for kind in ("sft", "dpo"):  # two tuned policies that played as the PPO checkpoint did
        policy = PolicyFactory(name=kind, metadata={"finetune": {"kind": kind}})
        entry = EvaluationEntry.objects.create(evaluation=built.evaluation, label=kind, policy=policy, position=9)
        for episode in EvaluationEpisode.objects.filter(entry=built.ppo):
            EvaluationEpisode.objects.create(
                entry=entry,
                task_id=episode.task_id,
                trajectory_id=episode.trajectory_id,
                mode=episode.mode,
                sample=episode.sample,
                correct=episode.correct,
            )
    LoopRound.objects.create(
        loop="bench", number=1, start_policy=built.start, reference_policy=built.start, evaluation=built.evaluation
    )
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    saved = tmp_path / "bench.json"
    out = bench("benchmarks/compare_dpo.py", "--loops", "bench", "--json", str(saved), env=env)
    assert re.search(r"^\| sampled: DPO - RL best \| \+0\.0 \[", out, re.MULTILINE)
    assert re.search(r"^\| sampled: DPO - start \| \+50\.0 \[", out, re.MULTILINE)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["pooled"]["greedy: SFT - start"]["mean"] == pytest.approx(0.5)
    other = tmp_path / "bench2.json"  # the same loop as if kept in a second database under another name
    other.write_text(json.dumps({"loops": {"bench2": json.loads(saved.read_text())["loops"]["bench"]}}))
    pooled = json.loads(bench("benchmarks/compare_dpo.py", "--pool", str(saved), str(other)).strip().splitlines()[-1])
    assert pooled["pooled"]["greedy: SFT - start"]["units"] == 2 * report["pooled"]["greedy: SFT - start"]["units"]


def test_suite_times_runs_make_test_on_databases_of_its_own(bench):
    out = bench(
        "benchmarks/suite_times.py",
        "--select",
        "tests/test_layout.py",
        "--workers",
        "0",
        "--database",
        f"arbiter_suite_smoke{SUFFIX.replace('-', '_')}",
        timeout=240,
    )
    assert re.search(r"^\| idle \| \d+ min \d+ s \| \d+ min \d+ s \| \d+ passed.* \(passed\) \|", out, re.MULTILINE)
    assert "The ten slowest (idle)" in out
    assert re.search(r"^\| tests/test_layout\.py \| \d+ \| \d+ \|$", out, re.MULTILINE)  # the phases by file


def test_judge_run_times_a_chat_judge_run_against_its_client_alone(bench):
    out = bench("benchmarks/judge_run.py", "--comparisons", "4", "--repeats", "1", "--concurrency", "2")
    figures = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert figures["comparisons"] == 4 and figures["floor_ms_per_comparison"] > 0 and figures["ratio"] > 0


def test_rl_sanity_runs_rl_from_a_cloned_start_and_a_mutation(bench, tmp_path):
    out = bench(
        "benchmarks/rl_sanity.py",
        "--seeds",
        "0",
        "--algorithms",
        "rloo",
        "--mutate",
        "sign",
        "--out",
        str(tmp_path),
        "--set",
        "bc_steps=20",
        "iterations=1",
        "episodes_per_iteration=8",
        "eval_tasks=4",
    )
    rows = _table_rows(out, "0")
    assert [r[2] for r in rows] == ["defaults", "mutated: sign"], out


def test_web_environments_times_the_labeling_screen_beside_its_floor(bench):
    out = json.loads(bench("benchmarks/web_environments.py", "--renders", "2", "--start-timeout", "1", timeout=180))
    assert set(out["page_ms_median"]) == {"no environment (floor)", "hung environment"}
    assert out["replay_queued"] == 1 and out["environment_modules_in_web_process"] == []
    assert out["worker_start_error"].startswith("MCPEnvironmentError")


def test_judge_dead_endpoint_times_a_judge_run_that_gives_up_on_a_dead_endpoint(bench):
    out = bench("benchmarks/judge_dead_endpoint.py", "--comparisons", "3", "--repeats", "1")
    figures = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert figures["statuses"] == ["failed"] and figures["calls"] == [5] and figures["progress"][0] < 1
    assert figures["max_s"] > 0 and figures["met"] is True, out


def test_pentest_edges_holds_the_correction_limits_and_refuses_a_big_anonymous_body(bench):
    out = bench(
        "benchmarks/pentest_edges.py",
        *"--burst 4 --per-side 2 --per-hour 6 --body-mb 2 --posts 2 --workers 1 --threads 2".split(),
    )
    rows = {r[0]: r for r in _table_rows(out)}
    assert rows["corrections of one side"][3].startswith("2 stored") and rows["corrections of one side"][4] == "yes"
    assert rows["corrections in the hour"][3].startswith("6 stored") and rows["corrections in the hour"][4] == "yes"
    body = rows["anonymous POST /login/ of 2 MB"]
    assert "status [413]" in body[3] and body[4] == "yes"


def test_record_lines_times_reading_records_with_and_without_the_line_scan(bench):
    out = bench("benchmarks/record_lines.py", "--mb", "0.2", "--repeats", "1")
    assert re.search(r"^\d+ records, 0\.2 MB, medians of 1:$", out, re.MULTILINE), out[-500:]
    assert re.search(r"the scan adds [+-]\d+% to reading the records", out), out[-500:]


def test_export_length_count_counts_tokens_as_transformers_does(bench):
    figures = json.loads(bench("benchmarks/export_length_count.py", "--rows", "12", "--words", "900"))
    for fmt in ("trl", "trl_text"):
        # Observations of about 900 words put most rows over TRL's 1,024 tokens, and each count
        # agrees with transformers' own tokenization.
        assert figures[fmt]["mismatches_against_transformers"] == 0 and 0 < figures[fmt]["dropped"] <= 12, figures


def test_gguf_register_times_a_conversion_its_reuse_and_its_floor(bench, tmp_path):
    from tests.training.gguf_fixtures import tiny_gguf
    from training.envs.arithmetic import ArithmeticEnvironment

    source = tiny_gguf(tmp_path / "tiny.gguf", [ArithmeticEnvironment(seed=3, n_tasks=20)])
    out = bench(
        "benchmarks/gguf_register.py",
        "--source",
        str(source),
        "--environment",
        "arithmetic",
        "--json",
        str(tmp_path / "figures.json"),
    )
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert "first registration in all (target < 120 s idle)" in out and figures["parameters"] > 0
    assert figures["second_conversion_s"] < figures["first_conversion_s"]
