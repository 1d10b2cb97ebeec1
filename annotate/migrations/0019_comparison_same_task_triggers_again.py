"""SQLite: the comparison's same-task triggers again. 0004 rebuilt annotate_comparison, which
dropped the triggers 0003 had made, so embedded databases made before this did not enforce the
rule (annotate/comparison_same_task.py). Nothing to do on PostgreSQL, whose constraints stay."""
from django.db import migrations

from annotate.comparison_same_task import sqlite_triggers_again


class Migration(migrations.Migration):
    dependencies = [("annotate", "0018_drafts_and_revisions")]

    operations = [migrations.RunPython(sqlite_triggers_again, migrations.RunPython.noop)]
