"""Both trajectories of a comparison belong to the comparison's task, enforced by the database:
annotate/comparison_same_task.py."""
from django.db import migrations

from annotate.comparison_same_task import backwards, forwards


class Migration(migrations.Migration):
    dependencies = [("annotate", "0002_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
