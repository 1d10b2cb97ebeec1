"""Reads of runs: the list with its filters, and metric series for the curves."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import QuerySet

from webapp.models import Run, RunMetric


def runs_filtered(*, kind: str = "", status: str = "") -> QuerySet[Run]:
    runs = Run.objects.select_related("created_by").order_by("-created_at")
    if kind:
        runs = runs.filter(kind=kind)
    if status:
        runs = runs.filter(status=status)
    return runs


def run_metric_series(run: Run) -> dict[str, list[tuple[int, float | None]]]:
    """name -> [(step, value)] in step order."""
    series: dict[str, list] = defaultdict(list)
    for step, values in RunMetric.objects.filter(run=run).order_by("step", "id").values_list("step", "values"):
        for name, value in values.items():
            series[name].append((step, value))
    return dict(series)


def metric_groups(series: dict[str, list]) -> dict[str, dict[str, list]]:
    """Curves that share a chart: metrics with the same prefix before "/" (loss/policy, loss/value)."""
    groups: dict[str, dict[str, list]] = defaultdict(dict)
    for name, points in sorted(series.items()):
        groups[name.split("/")[0] if "/" in name else name][name] = points
    return dict(groups)
