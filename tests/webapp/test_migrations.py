"""The squashed migrations (annotate 0001-0018, training 0001-0006, webapp 0002-0006) give a new
database the tables the whole chain gives an old one, and the comparison's same-task rule holds
on a new embedded (SQLite) database, where a table rebuild had silently dropped its triggers."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]


def test_the_squashed_migrations_leave_the_same_models_as_the_chain_they_replace():
    chain = MigrationLoader(None, replace_migrations=False)
    squashed = MigrationLoader(None, replace_migrations=True)
    used = {key for key in squashed.graph.nodes if "squashed" in key[1]}
    assert used == {
        ("annotate", "0001_squashed_0018_drafts_and_revisions"),
        ("training", "0001_squashed_0006_loop_methods"),
        ("webapp", "0002_squashed_0006_run_queue"),
    }
    changes = MigrationAutodetector(chain.project_state(), squashed.project_state()).changes(graph=squashed.graph)
    assert changes == {}


def test_a_new_embedded_database_refuses_a_comparison_across_tasks(tmp_path):
    database = tmp_path / "new.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    with sqlite3.connect(database) as db:
        triggers = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert triggers == {"comparison_same_task_insert", "comparison_same_task_update"}
        columns = {row[1]: row for row in db.execute("PRAGMA table_info(annotate_comparison)")}
        assert {"task_id", "trajectory_a_id", "trajectory_b_id"} <= set(columns)
        # Trajectories 2 and 3 do not exist, so neither belongs to task 1: the trigger refuses the
        # row before any other constraint is checked.
        with pytest.raises(sqlite3.IntegrityError, match="comparison_same_task"):
            db.execute("INSERT INTO annotate_comparison (task_id, trajectory_a_id, trajectory_b_id) VALUES (1, 2, 3)")
