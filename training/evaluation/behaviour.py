"""What changed in behaviour: per situation, the share of tasks each system handled right.

The evaluation page's panel "What changed in behaviour" and the report's `behaviour` (the JSON
export and the API) read `evaluation_behaviour`. A task's situation is its
`Task.metadata["situation"]` (the encyclopedia names one per habit of its demonstrator,
training/envs/encyclopedia/habits.py, and "other"); a task without one is grouped by its
metadata "qtype"; an evaluation whose tasks name neither has no situations, and the panel
says so. Per situation, per system (the baseline first) and per mode (sampled, greedy): the
share of the situation's tasks handled right (a task's episodes averaged first, then the
tasks: several samples of one task are one unit) with its 95% Wilson interval over the tasks
(`core.intervals.share_interval`), and the paired difference from the baseline on the tasks
both played. One query reads every episode's outcome; no query per task.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import TextField, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from core.intervals import share_interval
from core.problems import problem
from training.evaluation.episodes import paired_difference
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode
from webapp.errors import ArbiterError

MODES = tuple(EvaluationEpisode.Mode.values)  # sampled, then greedy
OTHER = "other"  # the situation of a task that names none while others do
NO_SITUATIONS = (
    "The environment names no situations (its tasks carry neither a situation nor a question type), "
    "so there is nothing to break the figures down by."
)


def situation_expression():
    """A task's situation in SQL, read from an episode: metadata "situation", else "qtype", else OTHER."""
    return Coalesce(
        KeyTextTransform("situation", "task__metadata"),
        KeyTextTransform("qtype", "task__metadata"),
        Value(OTHER),
        output_field=TextField(),
    )


def _order(name: str, habits: dict[str, str]) -> tuple:
    """The situations a habit acts in first, then the rest, each by name; OTHER last."""
    return (name == OTHER, name not in habits, name)


def _outcomes(evaluation: Evaluation) -> tuple[str | None, dict, dict[str, str]]:
    """What the tasks are grouped by ("situation", "qtype" or None),
    situation -> (entry id, mode) -> task id -> each episode's outcome (1 or 0), and situation ->
    the demonstrator's habit there, in words (the environment writes it beside the situation in
    a task's metadata: the web process never imports an environment)."""
    rows = (
        EvaluationEpisode.objects.filter(entry__evaluation=evaluation)
        .annotate(
            situation=KeyTextTransform("situation", "task__metadata"),
            qtype=KeyTextTransform("qtype", "task__metadata"),
            habit=KeyTextTransform("habit", "task__metadata"),
        )
        .order_by("entry_id", "mode", "task_id", "sample")
        .values_list("entry_id", "mode", "task_id", "situation", "qtype", "habit", "correct")
    )
    found: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    named: set[str] = set()
    habits: dict[str, str] = {}
    for entry_id, mode, task_id, situation, qtype, habit, correct in rows:
        if situation is not None and habit:
            habits[situation] = habit
        if situation is not None:
            named.add("situation")
        elif qtype is not None:
            named.add("qtype")
        key = situation if situation is not None else qtype if qtype is not None else OTHER
        found[key][(entry_id, mode)][task_id].append(float(correct))
    grouped_by = "situation" if "situation" in named else "qtype" if named else None
    return grouped_by, found, habits


def _share(tasks: dict[int, list[float]]) -> dict:
    """The mean over tasks of each task's share of episodes handled right, its 95% Wilson
    interval over the tasks, the number of tasks (n) and of episodes."""
    means = [sum(outcomes) / len(outcomes) for outcomes in tasks.values()]
    low, high = share_interval(sum(means), len(means))
    return {
        "mean": sum(means) / len(means),
        "low": low,
        "high": high,
        "n": len(means),
        "episodes": sum(len(outcomes) for outcomes in tasks.values()),
    }


def _temperature(system: dict, baseline: dict | None, config: dict) -> float:
    """The temperature of a system's sampled episodes: the evaluation's, or the start's best on dev
    for the start's own policy played again (services.evaluation_execute, `play_baseline_at`)."""
    chosen = (config.get("best_temperature") or {}).get("chosen")
    same_policy = baseline is not None and system["policy"]["id"] == baseline["policy"]["id"]
    if chosen is not None and same_policy and not system["is_baseline"] and system["kind"] == "policy":
        return float(chosen)
    return float(config.get("temperature", 1.0))


def figure_words(system: dict, baseline: dict | None, mode: str, config: dict) -> str:
    """What a figure of `system` in `mode` is, in words: "sampled at T=1, 2 episodes per task",
    "best of 4 samples at T=1, the reward model's choice", or "greedy, one episode per task"."""
    if mode == EvaluationEpisode.Mode.GREEDY:
        return "greedy, one episode per task"
    temperature = _temperature(system, baseline, config)
    if temperature == 0:  # the start's best temperature on dev may be greedy, stored as its sampled row
        return "greedy, one episode per task"
    if system["kind"] == EvaluationEntry.Kind.BEST_OF_N:
        return f"best of {system['n']} samples at T={temperature:g}, the reward model's choice"
    samples = config.get("samples")
    each = f", {samples} episode{'s' if samples != 1 else ''} per task" if samples else ""
    return f"sampled at T={temperature:g}{each}"


def _system_row(system: dict, baseline: dict | None, by_mode: dict, config: dict) -> dict:
    figures, difference = {}, {}
    for mode in MODES:
        tasks = by_mode.get((system["id"], mode))
        if not tasks:
            continue
        figures[mode] = {**_share(tasks), "words": figure_words(system, baseline, mode, config)}
        start = by_mode.get((baseline["id"], mode)) if baseline is not None else None
        shared = sorted(set(tasks) & set(start or {}))
        if shared and not system["is_baseline"]:
            difference[mode] = paired_difference([start[t] for t in shared], [tasks[t] for t in shared])
    return {
        "id": system["id"],
        "label": system["label"],
        "name": system["name"],
        "method": system["method"],
        "is_baseline": system["is_baseline"],
        "figures": figures,
        "vs_baseline": difference,
    }


def evaluation_behaviour(evaluation: Evaluation, *, systems: list[dict]) -> dict:
    """Per situation, each system's share handled right per mode and its paired difference from
    the baseline. `systems`: the report's systems (selectors.evaluation_report), whose order,
    names and methods the rows keep."""
    grouped_by, found, habits = _outcomes(evaluation)
    if grouped_by is None:
        return {"grouped_by": None, "note": NO_SITUATIONS, "modes": [], "situations": []}
    config = evaluation.config or {}
    baseline = next((s for s in systems if s["is_baseline"]), None)
    situations = []
    for name in sorted(found, key=lambda n: _order(n, habits)):
        by_mode = found[name]
        rows = [_system_row(s, baseline, by_mode, config) for s in systems]
        situations.append(
            {
                "name": name,
                "habit": habits.get(name, "") if grouped_by == "situation" else "",
                "tasks": len({task for tasks in by_mode.values() for task in tasks}),
                "systems": [row for row in rows if row["figures"]],
            }
        )
    modes = [m for m in MODES if any(m in r["figures"] for s in situations for r in s["systems"])]
    return {"grouped_by": grouped_by, "note": "", "modes": modes, "situations": situations}


def behaviour_for_situation(behaviour: dict, situation: str) -> dict:
    """The behaviour figures of one situation only; an ArbiterError (a 400) naming the
    evaluation's situations when it has no task in `situation`."""
    kept = [s for s in behaviour["situations"] if s["name"] == situation]
    if not kept:
        names = ", ".join(s["name"] for s in behaviour["situations"]) or "none (it names no situations)"
        raise ArbiterError(
            f"situation: no task of this evaluation is in that situation; its situations: {names}.",
            details=[problem("unknown situation", field="situation")],
        )
    return {**behaviour, "situations": kept}


def evaluation_situations(evaluation: Evaluation) -> list[str]:
    """The situations of the evaluation's tasks, in the panel's order (one query); none when its
    tasks name neither a situation nor a question type."""
    rows = list(
        EvaluationEpisode.objects.filter(entry__evaluation=evaluation)
        .annotate(
            situation=KeyTextTransform("situation", "task__metadata"),
            qtype=KeyTextTransform("qtype", "task__metadata"),
            habit=KeyTextTransform("habit", "task__metadata"),
        )
        .values_list("situation", "qtype", "habit")
        .distinct()
    )
    named = {situation if situation is not None else qtype for situation, qtype, _ in rows} - {None}
    if not named:
        return []
    habits = {situation: habit for situation, _, habit in rows if situation is not None and habit}
    every = {
        situation if situation is not None else qtype if qtype is not None else OTHER for situation, qtype, _ in rows
    }
    return sorted(every, key=lambda name: _order(name, habits))
