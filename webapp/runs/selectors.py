"""Reads of runs: the list with its filters, metric series for the curves, the result as rows,
and the artifact files a reader may download."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from django.conf import settings
from django.db.models import QuerySet
from django.urls import NoReverseMatch, reverse

from core.configs import config_from_input
from webapp.models import Run, RunMetric
from webapp.numbers import is_number, metric_unit, readable_key, readable_number

SUMMARY_ROWS = 300  # a result longer than this is cut, with a note
LIST_ITEMS = 12  # a list of numbers longer than this is written as its first items and a count
ARTIFACT_FILES = 100  # files listed per artifact folder
# Result keys that name a row with a page of its own: the suffix, the URL name.
_LINKS = (
    ("reward_model_id", "rewardmodel:detail"),
    ("evaluation_id", "training:evaluation"),
    ("snapshot_id", "annotate:dataset"),
    ("campaign_id", "annotate:campaign"),
    ("policy_id", "training:policy"),
    ("run_id", "runs:detail"),
)


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


# --- The result (Run.summary) as a table ---------------------------------------------------------


def _link(key: str, value) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return ""
    for suffix, url_name in _LINKS:
        if key == suffix or key.endswith("_" + suffix):
            try:
                return reverse(url_name, args=[value])
            except NoReverseMatch:
                return ""
    return ""


def _value_text(key: str, value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_number(value):
        if key.endswith("_id") or key in ("id", "round", "step", "iteration", "seed"):
            return str(value)
        return readable_number(value, metric_unit(key, [value]))
    return str(value)


def summary_rows(summary: dict) -> list[dict]:
    """The run's result flattened for a table: {"key", "value", "url"} per leaf, nested keys joined
    with " › " ("test › accuracy"), numbers readable ("81.2%", "1,230 s"), ids linked to their page."""
    rows: list[dict] = []

    def walk(prefix: list[str], raw_key: str, value) -> None:
        if len(rows) > SUMMARY_ROWS:
            return
        if isinstance(value, dict):
            if not value:
                rows.append({"key": " › ".join(prefix), "value": "–", "url": ""})
            for key, inner in value.items():
                walk(prefix + [readable_key(key)], str(key), inner)
            return
        if isinstance(value, (list, tuple)):
            if all(not isinstance(v, (dict, list, tuple)) for v in value):
                shown = ", ".join(_value_text(raw_key, v) for v in value[:LIST_ITEMS])
                more = f" … ({len(value)} in all)" if len(value) > LIST_ITEMS else ""
                rows.append({"key": " › ".join(prefix), "value": (shown + more) or "none", "url": ""})
                return
            for n, inner in enumerate(value, start=1):
                walk(prefix + [str(n)], raw_key, inner)
            return
        rows.append({"key": " › ".join(prefix), "value": _value_text(raw_key, value), "url": _link(raw_key, value)})

    for key, value in (summary or {}).items():
        walk([readable_key(key)], str(key), value)
    if len(rows) > SUMMARY_ROWS:
        rows = rows[:SUMMARY_ROWS] + [
            {"key": "…", "value": "cut here: the whole result is in the API (GET /api/v1/runs/{id})", "url": ""}
        ]
    return rows


# --- Artifacts ---------------------------------------------------------------------------------


def run_folder(run: Run) -> Path:
    """Where a run writes its files (`webapp.runs.services.run_dir`), without creating it."""
    return (Path(settings.VAR_DIR) / "runs" / str(run.pk)).resolve()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _artifact_root(run: Run, artifact: dict) -> Path | None:
    """The artifact's path, resolved (links followed), when it lies in the run's folder."""
    try:
        path = Path(str(artifact.get("path", ""))).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    return path if _inside(path, run_folder(run)) else None


def run_artifacts(run: Run) -> list[dict]:
    """The run's artifacts as a reader sees them: name, size, and the files that can be downloaded
    (`name` relative to the run's folder). Artifacts kept elsewhere (a registered reward model, a
    policy's folder) have no files here: their rows are reached through the lineage."""
    folder = run_folder(run)
    found = []
    for artifact in run.artifacts or []:
        root = _artifact_root(run, artifact)
        files, more = [], 0
        if root is not None:
            paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
            for path in paths:
                resolved = path.resolve()
                if not _inside(resolved, folder):
                    continue  # a link out of the run's folder is never offered
                if len(files) == ARTIFACT_FILES:
                    more += 1
                    continue
                name = path.relative_to(folder).as_posix()
                files.append(
                    {
                        "name": name,
                        "bytes": resolved.stat().st_size,
                        "label": path.relative_to(root).as_posix() if path != root else path.name,
                        # A URL path cannot carry a line break or another control character.
                        "servable": not any(ord(ch) < 32 or ord(ch) == 127 for ch in name),
                    }
                )
        found.append(
            {
                "name": str(artifact.get("name", "artifact")),
                "bytes": artifact.get("bytes"),
                "files": files,
                "more": more,
                "is_folder": root is not None and root.is_dir(),
                "downloadable": root is not None,
            }
        )
    return found


def run_artifact_file(run: Run, name: str) -> Path | None:
    """The file `name` (relative to the run's folder) when it is, or lies in, one of the run's recorded
    artifacts and, links followed, inside the run's folder; None for anything else."""
    if not name or "\x00" in name or name.startswith(("/", "\\")):
        return None
    folder = run_folder(run)
    try:
        path = (folder / name).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    if not _inside(path, folder) or not path.is_file():
        return None
    for artifact in run.artifacts or []:
        root = _artifact_root(run, artifact)
        if root is not None and _inside(path, root):
            return path
    return None


def policy_in_training() -> Run | None:
    """The first behaviour-cloning run queued or running: the policy a newcomer waits for."""
    return Run.objects.filter(kind="bc", status__in=Run.ACTIVE).order_by("created_at").first()


# --- How long a run will take, for its launch form ------------------------------------------------

ESTIMATE_RUNS = 5  # the newest succeeded runs of a kind the estimate reads


@dataclass(frozen=True)
class RunEstimate:
    seconds: float | None  # about how long a run of this config takes here (None: no run to read yet)
    runs: int  # succeeded runs of the kind it is read from
    workers: tuple[str, ...]  # the machines they ran on
    per_unit: float | None  # seconds per unit of work, where the kind counts its work
    units: float | None  # this config's units of work


def run_estimate(kind, config) -> RunEstimate:
    """About how long a run of `kind` with `config` takes on the workers here: the median seconds per
    unit of work (the kind's `work(config)`) of its newest succeeded runs, times this config's units.
    Past runs are the measure because the same settings take minutes on one machine and an hour on
    a busy one; with none yet there is no estimate, and the form says so."""
    work = kind.work or (lambda _config: 1.0)
    rates, workers = [], []
    past = (
        Run.objects.filter(kind=kind.name, status=Run.Status.SUCCEEDED)
        .exclude(started_at=None)
        .exclude(finished_at=None)
        .order_by("-finished_at")
        .only("config", "started_at", "finished_at", "worker")
    )
    for run in past[: ESTIMATE_RUNS * 4]:
        try:
            units = float(work(config_from_input(kind.config_class, run.config)))
        except (ValueError, TypeError):  # a config an older version wrote: not comparable
            continue
        seconds = (run.finished_at - run.started_at).total_seconds()
        if units > 0 and seconds > 0:
            rates.append(seconds / units)
            workers.append(run.worker)
        if len(rates) == ESTIMATE_RUNS:
            break
    units = float(work(config))
    if not rates:
        return RunEstimate(None, 0, (), None, units if kind.work else None)
    per_unit = median(rates)
    return RunEstimate(
        per_unit * units,
        len(rates),
        tuple(sorted({w for w in workers if w})),
        per_unit if kind.work else None,
        units if kind.work else None,
    )
