"""The evaluation run's `ppo_run_id` is `rl_run_id` (it names a PPO, RLOO or GRPO run): stored run
and evaluation configs are renamed with it, so a queued or resumed run and an old dashboard read
the same key."""
from django.db import migrations


def _rename(apps, old: str, new: str) -> None:
    for model in (apps.get_model("webapp", "Run"), apps.get_model("training", "Evaluation")):
        for row in model.objects.filter(config__has_key=old).only("pk", "config"):
            config = dict(row.config)
            config[new] = config.pop(old)
            model.objects.filter(pk=row.pk).update(config=config)


def forwards(apps, schema_editor):
    _rename(apps, "ppo_run_id", "rl_run_id")


def backwards(apps, schema_editor):
    _rename(apps, "rl_run_id", "ppo_run_id")


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0002_rounds"),
        ("webapp", "0005_worker_beats"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=True)]
