"""The kinds of run, registered by the apps that implement them, and their configs.

A kind is a config dataclass (defaults and help text), a check of that config against the
database (run before anything is queued), the lineage links of its inputs, and the
function a worker calls to execute it. Apps register their kinds in `AppConfig.ready()`,
so this core app imports none of them. Heavy libraries (torch, transformers, TRL) are
imported inside `execute` only, never when a kind is registered.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

_KINDS: dict[str, RunKind] = {}
# Whole numbers in a config stay exact in JSON (and in JavaScript): at most 2**53.
MAX_CONFIG_INT = 2**53


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


# --- Config dataclasses -----------------------------------------------------------------


@cache
def field_help(cls: type) -> dict[str, str]:
    """Help text per field, from its `metadata["help"]` (as TRL's configs do): what the launch
    form shows under the field and docs/config-options.md lists."""
    return {f.name: f.metadata["help"] for f in dataclasses.fields(cls) if "help" in f.metadata}


def _field_type(cls: type, name: str):
    """The field's type, with `X | None` read as X (see `_optional`)."""
    kind = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return kind


def _optional(cls: type, name: str) -> bool:
    kind = typing.get_type_hints(cls)[name]
    return typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind)


def _coerce(value, kind, name: str):
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off", ""):
            return value.lower() in ("true", "1", "yes", "on")
        raise ValueError(f"{name}: expected true or false, got {value!r}.")
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, str, float)):
            raise ValueError(f"{name}: expected a whole number, got {value!r}.")
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{name}: out of range (at most {MAX_CONFIG_INT:,} either way).") from None
        except ValueError:
            raise ValueError(f"{name}: expected a whole number, got {str(value)[:40]!r}.") from None
        if not number.is_integer():
            raise ValueError(f"{name}: expected a whole number, got {value!r}.")
        whole = int(value) if isinstance(value, int) else int(number)
        if abs(whole) > MAX_CONFIG_INT:
            raise ValueError(f"{name}: {whole} is out of range (at most {MAX_CONFIG_INT:,} either way).")
        return whole
    if kind is float:
        if isinstance(value, bool):
            raise ValueError(f"{name}: expected a number, got {value!r}.")
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{name}: must be a finite number.") from None
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a number, got {str(value)[:40]!r}.") from None
        if not math.isfinite(number):
            raise ValueError(f"{name}: must be a finite number.")
        return number
    if kind is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"{name}: expected text, got {value!r}.")
        return str(value)
    if dataclasses.is_dataclass(kind):
        if isinstance(value, kind):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"{name}: expected an object with the fields of {kind.__name__}.")
        return config_from_input(kind, value, prefix=f"{name}.")
    return value


def config_from_input(cls: type, data: dict, *, prefix: str = ""):
    """Build a config dataclass from user input (JSON or a form); ValueError lists every problem."""
    if not isinstance(data, dict):
        raise ValueError("config must be an object.")
    names = {f.name for f in dataclasses.fields(cls)}
    problems = [f"{prefix}{key}: unknown setting." for key in data if key not in names]
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        if data[f.name] is None and _optional(cls, f.name):
            values[f.name] = None
            continue
        try:
            values[f.name] = _coerce(data[f.name], _field_type(cls, f.name), prefix + f.name)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("\n".join(problems))
    config = cls(**values)
    check = getattr(config, "validate", None)
    if check is not None:
        found = check()
        if found:
            raise ValueError("\n".join(prefix + p for p in found))
    return config


def config_as_json(config) -> dict:
    return dataclasses.asdict(config)


def simple_fields(cls: type) -> list[tuple[str, type, object, str]]:
    """(name, type, default, help) of the fields a form can edit (numbers, text, switches)."""
    helps = field_help(cls)
    rows = []
    for f in dataclasses.fields(cls):
        kind = _field_type(cls, f.name)
        if kind not in (int, float, str, bool):
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        rows.append((f.name, kind, default, helps.get(f.name, "")))
    return rows
