"""Both trajectories of a comparison belong to the comparison's task, enforced by the database.

PostgreSQL: composite foreign keys (trajectory_x_id, task_id) -> trajectory (id, task_id),
which the unique constraint `trajectory_id_task_unique` makes possible.
SQLite (embedded mode) cannot add constraints to an existing table, so triggers raise
the same named error on insert and update.
"""
from django.db import migrations

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
    "DROP TRIGGER comparison_same_task_insert",
    "DROP TRIGGER comparison_same_task_update",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("annotate", "0002_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        )
    ]
