"""A config is a dataclass whose fields carry their help (`metadata["help"]`, as TRL's configs
do), declared once (training/rl/config.py, training/loop/config.py, rewardmodel/config.py, ...);
everything a person sets it through is made from those fields here: the reading of user input
(the API's JSON, a launch form: `config_from_input`), the launch forms' fields (`simple_fields`,
webapp/runs/forms.py), the docs' tables (arbiter/generated_docs.py) and the command-line
options (`add_config_arguments`, `config_from_arguments`: every management command and script
that takes a config). Plain Python, no Django.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import types
import typing
from functools import cache

from core import json_input

# Whole numbers in a config stay exact in JSON (and in JavaScript): at most 2**53.
MAX_CONFIG_INT = 2**53
# Numbers written as text (a form, a command line): ASCII only, nothing `float()` also reads
# ("٣", " 1", "1_000", "nan", "infinity").
WHOLE_TEXT = re.compile(r"-?[0-9]+")
NUMBER_TEXT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


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
        if isinstance(value, str) and not WHOLE_TEXT.fullmatch(value):  # not " 7", "3.0", "٣" (core/ids.py)
            raise ValueError(f"{name}: expected a whole number, got {value[:40]!r}.")
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
        if isinstance(value, str) and not NUMBER_TEXT.fullmatch(value):  # not " 1", "1_0", "٣", "nan"
            if value.lower().lstrip("+-") in ("nan", "inf", "infinity"):
                raise ValueError(f"{name}: must be a finite number.")
            raise ValueError(f"{name}: expected a number, got {value[:40]!r}.")
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
    container = typing.get_origin(kind) or kind
    if container in (dict, list) and not isinstance(value, container):
        raise ValueError(f"{name}: expected {'an object' if container is dict else 'a list'}, got {value!r:.40}.")
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
            continue
        choices = f.metadata.get("choices")
        if choices and values[f.name] not in choices:
            problems.append(f"{prefix}{f.name}: one of {', '.join(map(str, choices))}; got {values[f.name]!r:.40}.")
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
        rows.append((f.name, kind, _default_of(f), helps.get(f.name, "")))
    return rows


# --- Command-line options -----------------------------------------------------------------


def flag(name: str) -> str:
    """A field's option: `max_steps` -> `--max-steps`."""
    return "--" + name.replace("_", "-")


def _default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def add_config_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: tuple[str, ...] = (),
    aliases: dict[str, tuple[str, ...]] | None = None,
    negations: dict[str, str] | None = None,
) -> None:
    """One option per field of the config `cls` (but `skip`), its help and default the field's:
    `--field-name VALUE`; a switch is `--x` / `--no-x`; a field holding an object or a list takes
    JSON; a field with `metadata["choices"]` takes one of them. `aliases` gives a field more
    option strings (`{"rl_kind": ("--rl",)}`), `negations` an option that turns a switch off
    (`{"annotator_correct_first": "--annotator-weighted"}`). The values are read by
    `config_from_arguments`, through `config_from_input`, as the API reads them."""
    helps, aliases, negations = field_help(cls), aliases or {}, negations or {}
    group = parser.add_argument_group(f"{cls.__name__} (each option a field of the config)")
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind, default = _field_type(cls, f.name), _default_of(f)
        shown = json.dumps(default) if isinstance(default, dict | list) else default
        text = (helps.get(f.name, "") + f" (default: {shown!r})").replace("%", "%%").strip()
        names = (flag(f.name), *aliases.get(f.name, ()))
        if kind is bool:
            group.add_argument(*names, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            metavar = "JSON" if kind not in (int, float, str) else kind.__name__.upper()
            choices = f.metadata.get("choices")
            group.add_argument(*names, dest=f.name, default=None, metavar=metavar, choices=choices, help=text)
        if f.name in negations:
            group.add_argument(
                negations[f.name],
                dest=f.name,
                action="store_false",
                default=None,
                help=f"the same as {flag('no_' + f.name)}",
            )


def config_from_arguments(cls: type, arguments, *, skip: tuple[str, ...] = (), **fixed):
    """The config from parsed options (an argparse Namespace or a dict): each field given on the
    command line, read as the API reads it (`config_from_input`: whole numbers whole, JSON
    strict), the rest their defaults; `fixed` sets fields the command decides itself. ValueError
    lists every problem, each starting with its field."""
    given = vars(arguments) if isinstance(arguments, argparse.Namespace) else dict(arguments)
    data, problems = dict(fixed), []
    for f in dataclasses.fields(cls):
        value = given.get(f.name)
        if f.name in skip or f.name in fixed or value is None:
            continue
        kind = _field_type(cls, f.name)
        if kind not in (int, float, str, bool) and isinstance(value, str):
            container = typing.get_origin(kind) or kind
            what = "a JSON object" if container is dict else "JSON"
            try:
                value = json_input.loads(value)
            except json_input.JsonInputError as exc:
                problems.append(f"{f.name}: takes {what} ({exc}).")
                continue
            if container in (dict, list) and not isinstance(value, container):
                problems.append(f"{f.name}: takes {what}, e.g. '{{\"iterations\": 20}}'; got {value!r:.40}.")
                continue
        data[f.name] = value
    if problems:
        raise ValueError("\n".join(problems))
    return config_from_input(cls, data)
