"""The kinds of run, registered by the apps that implement them, and their configs.

A kind is a config dataclass (defaults and help text), a check of that config against the
database (run before anything is queued), the lineage links of its inputs, and the
function a worker calls to execute it. Apps register their kinds in `AppConfig.ready()`,
so this core app imports none of them. Heavy libraries (torch, transformers, TRL) are
imported inside `execute` only, never when a kind is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

_KINDS: dict[str, RunKind] = {}


@dataclass(frozen=True)
class RunKind:
    name: str
    label: str
    description: str
    config_class: type
    # execute(run, config, reporter, compute, resume_from) -> summary dict; raises RunCancelled on cancel
    execute: Callable
    # check(config) -> problems found in the database (missing policy, too few pairs, ...)
    check: Callable = lambda config: []
    # start_check(config) -> problems only a worker can find, run there when the run starts: the
    # checks that start its environment (the web process never starts one; its `check` reads
    # names only there). A kind whose check plays an environment gives that check again here.
    start_check: Callable = lambda config: []
    # lineage(config) -> [{direction, type, id, label, url}] of the rows the run reads
    lineage: Callable = lambda config: []
    # field name -> callable giving [(value, label)] choices for the launch form
    choices: dict = field(default_factory=dict)
    resumable: bool = False
    # light(config) -> True for a run that loads no model (a rubric or chat judge): it goes to
    # the housekeeping queue, so it never waits behind training on the run queue
    light: Callable = lambda config: False
    # field name -> callable giving the launch form's starting value (None: the config's default):
    # the row the run can use as it stands (the newest reward model, a snapshot big enough), so
    # the form launches with what it shows
    suggest: dict = field(default_factory=dict)
    # work(config) -> units of work the run does (iterations x episodes, optimizer steps, ...): the
    # launch form's estimate scales past runs' seconds per unit by it. None: every run of the kind
    # counts as one unit (its estimate is past runs' typical wall time).
    work: Callable | None = None
    # work_words: what a unit is, for the estimate's sentence ("episodes played", "optimizer steps")
    work_words: str = ""


def register(kind: RunKind) -> None:
    _KINDS[kind.name] = kind


def get_kind(name: str) -> RunKind | None:
    return _KINDS.get(name)


def all_kinds() -> list[RunKind]:
    return sorted(_KINDS.values(), key=lambda k: k.label)
