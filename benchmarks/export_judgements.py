"""Export speed and memory: N judgements from PostgreSQL to Parquet (`raw` format).

    .venv/bin/python benchmarks/export_judgements.py --sizes 100000 1000000 --repeats 3

For each size: a scratch database `<name>_bench` is filled by SQL (comparisons with four
votes each, 200 annotators) and frozen into a snapshot; then, in fresh child processes,
(1) the floor: PostgreSQL's own `COPY (SELECT ...) TO STDOUT` of the same rows (the
export's query, its joins, order and computed columns), read to the end by psycopg, and
(2) the export through `annotate.exports` to a Parquet file (that COPY parsed by pyarrow
in blocks and written with zstd). Reports medians of wall time, rows per
second, the ratio export / floor, and the export's peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import ensure_bench_database  # noqa: E402

FILL_SQL = """
TRUNCATE annotate_snapshotjudgement, annotate_snapshotpair, annotate_datasetsnapshot_campaigns,
         annotate_datasetsnapshot, annotate_judgement, annotate_assignment, annotate_comparison,
         annotate_trajectory, annotate_task, annotate_policy, annotate_campaign CASCADE;
DELETE FROM webapp_user WHERE username LIKE 'bench-%%';
INSERT INTO webapp_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                         date_joined, is_synthetic)
SELECT '!', false, 'bench-' || g, '', '', '', false, true, now(), false FROM generate_series(1, 200) g;
INSERT INTO annotate_policy (created_at, updated_at, name, version, model_dir, metadata)
VALUES (now(), now(), 'bench', '', '', '{}');
INSERT INTO annotate_campaign (created_at, updated_at, name, guidelines, status, votes_per_comparison,
                               lease_seconds, gold_rate, dimensions, rationale_required)
VALUES (now(), now(), 'bench', '', 'active', 4, 900, 0, '[]', false);
INSERT INTO annotate_task (created_at, updated_at, external_id, prompt, environment, reference_answer, split, metadata)
SELECT now(), now(), 'bench-' || g, 'Question ' || g || '?', '', '', 'train', '{}' FROM generate_series(1, %(n_comp)s) g;
INSERT INTO annotate_trajectory (created_at, updated_at, task_id, policy_id, schema_version, steps, answer, source,
                                 content_hash, num_steps, metadata)
SELECT now(), now(), t.id, (SELECT id FROM annotate_policy LIMIT 1), 'arbiter.trajectory/v1',
       '[{"kind": "answer", "text": "x"}]', 'x', 'imported', md5(t.id || '-' || s), 1, '{}'
FROM annotate_task t CROSS JOIN generate_series(1, 2) s;
INSERT INTO annotate_comparison (created_at, updated_at, campaign_id, task_id, trajectory_a_id, trajectory_b_id,
                                 priority, status, is_gold, votes, slots_taken, adjudication_note)
SELECT now(), now(), (SELECT id FROM annotate_campaign LIMIT 1), task_id, min(id), max(id), 0, 'complete', false, 4, 4, ''
FROM annotate_trajectory GROUP BY task_id;
INSERT INTO annotate_assignment (created_at, updated_at, comparison_id, annotator_id, left_is_a, status,
                                 leased_until, shown_at, finished_at, skip_reason)
SELECT now(), now(), c.id, u.id, (c.id + v) %% 2 = 0, 'submitted', now(), now(), now(), ''
FROM annotate_comparison c CROSS JOIN generate_series(0, 3) v
JOIN LATERAL (SELECT id FROM webapp_user WHERE username = 'bench-' || (((c.id * 4 + v) %% 200) + 1)) u ON true;
INSERT INTO annotate_judgement (created_at, updated_at, comparison_id, annotator_id, assignment_id, choice, both_bad,
                                ratings, first_wrong_step_a, first_wrong_step_b, rationale, seconds, synthetic)
SELECT now(), now(), a.comparison_id, a.annotator_id, a.id, 1 + (a.id %% 5), false, '{"correctness": {"A": 4}}',
       NULL, CASE WHEN a.id %% 7 = 0 THEN 0 END, 'because the left one quotes its source', 12.5 + (a.id %% 30), false
FROM annotate_assignment a;
INSERT INTO annotate_datasetsnapshot (created_at, updated_at, name, description, filters, aggregation, ties, seed,
                                      test_fraction, status, progress, message, content_hash, stats, error)
VALUES (now(), now(), 'bench', '', '{}', 'majority', 'keep', 0, 0.2, 'succeeded', 1, '', repeat('0', 64), '{}', '');
INSERT INTO annotate_snapshotjudgement (snapshot_id, judgement_id, split)
SELECT (SELECT id FROM annotate_datasetsnapshot LIMIT 1), j.id, CASE WHEN j.comparison_id %% 5 = 0 THEN 'test' ELSE 'train' END
FROM annotate_judgement j;
ANALYZE;
"""


def floor_child() -> None:
    """PostgreSQL's own COPY of the export's query (the same SELECT), read to the end."""
    import django

    django.setup()
    from django.db import connection

    from annotate.exports import RawCopyBatches
    from annotate.models import DatasetSnapshot

    statement = RawCopyBatches(DatasetSnapshot.objects.get(name="bench"), None).copy_sql()
    start = time.perf_counter()
    rows = 0
    with connection.connection.cursor() as cursor, cursor.copy(statement) as copy:
        for data in copy:
            rows += bytes(data).count(b"\n")
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows}))


def export_child(out: str) -> None:
    import django

    django.setup()
    from annotate.exports import export_file
    from annotate.models import DatasetSnapshot

    snapshot = DatasetSnapshot.objects.get(name="bench")
    start = time.perf_counter()
    rows = export_file(snapshot, "raw", Path(out))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rows": rows, "peak_rss_mb": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--floor-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--export-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if args.floor_child:
        return floor_child()
    if args.export_child:
        return export_child(args.export_child)

    env = ensure_bench_database()
    import psycopg

    results = []
    for n in args.sizes:
        with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
            t = time.perf_counter()
            # One script of several statements: sent without parameters (the simple protocol).
            conn.execute(FILL_SQL.replace("%(n_comp)s", str(n // 4)).replace("%%", "%").encode())
            print(f"filled {n:,} judgements in {time.perf_counter() - t:.0f} s", flush=True)
        floors, exports = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, __file__, "--floor-child"], cwd=ROOT, env=env, check=True,
                                     capture_output=True, text=True)
                floors.append(json.loads(out.stdout.strip().splitlines()[-1]))
                target = Path(tmp) / "raw.parquet"
                out = subprocess.run([sys.executable, __file__, "--export-child", str(target)], cwd=ROOT, env=env,
                                     check=True, capture_output=True, text=True)
                exports.append(json.loads(out.stdout.strip().splitlines()[-1]))
                size_mb = target.stat().st_size / 2**20
        assert all(e["rows"] == n for e in exports), exports
        assert all(f["rows"] == n for f in floors), floors
        floor_s = statistics.median(f["seconds"] for f in floors)
        export_s = statistics.median(e["seconds"] for e in exports)
        results.append((n, floor_s, export_s, statistics.median(e["peak_rss_mb"] for e in exports), size_mb))
        print(json.dumps({"n": n, "floors": floors, "exports": exports}), flush=True)
    print("\n| judgements | COPY floor s | export s | export rows/s | export / floor | peak RSS MB | Parquet MB |")
    print("|---|---|---|---|---|---|---|")
    for n, floor_s, export_s, peak, size_mb in results:
        print(f"| {n:,} | {floor_s:.2f} | {export_s:.2f} | {n / export_s:,.0f} | {export_s / floor_s:.2f}x | "
              f"{peak:.0f} | {size_mb:.1f} |")


if __name__ == "__main__":
    main()
