"""The rubric's number has one name, `utility` (it was `score` in figures and `utility` in a
stored trajectory's outcome). Stored figures are renamed with it, so an old evaluation's table,
an old RL run's curves and a registered checkpoint's dev figures read the same key as new ones:
an evaluation entry's per-mode metrics, a run's logged `episode/score` and `eval/dev_score`, and
a checkpoint policy's `metadata.ppo.dev`."""

from django.db import migrations

RUN_METRICS = {"episode/score": "episode/utility", "eval/dev_score": "eval/dev_utility"}


def _renamed(values: dict, names: dict) -> dict:
    """`values` with each key of `names` renamed, unless a value of the new name is there already."""
    renamed = {}
    for key, value in values.items():
        new = names.get(key, key)
        renamed[key if new != key and new in values else new] = value
    return renamed


def _rename(apps, figure: dict, run_metrics: dict) -> None:
    entries = apps.get_model("training", "EvaluationEntry")
    for entry in entries.objects.only("pk", "metrics").iterator():
        if not isinstance(entry.metrics, dict):
            continue
        metrics = {
            mode: _renamed(figures, figure) if isinstance(figures, dict) else figures
            for mode, figures in entry.metrics.items()
        }
        if metrics != entry.metrics:
            entries.objects.filter(pk=entry.pk).update(metrics=metrics)

    run_metric = apps.get_model("webapp", "RunMetric")
    for row in run_metric.objects.filter(values__has_any_keys=list(run_metrics)).only("pk", "values").iterator():
        run_metric.objects.filter(pk=row.pk).update(values=_renamed(row.values, run_metrics))

    policies = apps.get_model("annotate", "Policy")
    for policy in policies.objects.filter(metadata__ppo__dev__has_key=next(iter(figure))).only("pk", "metadata"):
        metadata = dict(policy.metadata)
        metadata["ppo"] = {**metadata["ppo"], "dev": _renamed(metadata["ppo"]["dev"], figure)}
        policies.objects.filter(pk=policy.pk).update(metadata=metadata)


def forwards(apps, schema_editor):
    _rename(apps, {"score": "utility"}, RUN_METRICS)


def backwards(apps, schema_editor):
    _rename(apps, {"utility": "score"}, {new: old for old, new in RUN_METRICS.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0003_rl_run_id"),
        ("annotate", "0013_task_belongs_to_environment"),
        ("webapp", "0005_worker_beats"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=True)]
