"""Both trajectories of a comparison belong to the comparison's task, enforced by the database
(the migrations 0003, its squashed form and 0019 run these).

PostgreSQL: composite foreign keys (trajectory_x_id, task_id) -> trajectory (id, task_id),
which the unique constraint `trajectory_id_task_unique` makes possible.
SQLite (embedded mode) cannot add constraints to an existing table, so triggers raise the same
named error on insert and update. A migration that rebuilds annotate_comparison on SQLite
drops them (0004 did), so 0019 writes them again, and tests/annotate/test_migrations.py checks
a fresh SQLite database refuses a comparison across tasks.
"""

PG_FORWARD = [
    """ALTER TABLE annotate_comparison ADD CONSTRAINT comparison_a_same_task
       FOREIGN KEY (trajectory_a_id, task_id) REFERENCES annotate_trajectory (id, task_id)""",
    """ALTER TABLE annotate_comparison ADD CONSTRAINT comparison_b_same_task
       FOREIGN KEY (trajectory_b_id, task_id) REFERENCES annotate_trajectory (id, task_id)""",
]
PG_BACKWARD = [
    "ALTER TABLE annotate_comparison DROP CONSTRAINT comparison_a_same_task",
    "ALTER TABLE annotate_comparison DROP CONSTRAINT comparison_b_same_task",
]

_SQLITE_CHECK = """
    WHEN (SELECT task_id FROM annotate_trajectory WHERE id = NEW.trajectory_a_id) IS NOT NEW.task_id
      OR (SELECT task_id FROM annotate_trajectory WHERE id = NEW.trajectory_b_id) IS NOT NEW.task_id
    BEGIN SELECT RAISE(ABORT, 'comparison_same_task: both trajectories must belong to the comparison''s task'); END
"""
SQLITE_FORWARD = [
    f"CREATE TRIGGER comparison_same_task_insert BEFORE INSERT ON annotate_comparison FOR EACH ROW {_SQLITE_CHECK}",
    f"CREATE TRIGGER comparison_same_task_update BEFORE UPDATE ON annotate_comparison FOR EACH ROW {_SQLITE_CHECK}",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS comparison_same_task_insert",
    "DROP TRIGGER IF EXISTS comparison_same_task_update",
]


def _run(statements_by_vendor: dict, schema_editor) -> None:
    for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql)


def forwards(apps, schema_editor) -> None:
    """The constraints (PostgreSQL) or triggers (SQLite)."""
    _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}, schema_editor)


def backwards(apps, schema_editor) -> None:
    _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}, schema_editor)


def sqlite_triggers_again(apps, schema_editor) -> None:
    """SQLite only: the triggers as they should be, whether or not a table rebuild dropped them."""
    _run({"sqlite": SQLITE_BACKWARD + SQLITE_FORWARD}, schema_editor)
