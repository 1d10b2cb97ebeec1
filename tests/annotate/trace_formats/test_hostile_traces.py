"""Hostile trace exports: every fixture, mutated at random (values of the wrong type, keys
removed, lists emptied, deep nesting), is either imported or refused with a reason that
names the record, never a crash: the upload page and the API must answer 4xx, not 500.
A shape no converter foresaw still ends as a refusal (`reading.UNEXPECTED`), tested last."""

import copy
import json
import random
from pathlib import Path

import pytest

from annotate.trace_formats import reading
from annotate.trace_formats.reading import TRACE_FORMATS, detect_trace_format, read_traces
from annotate.trajectory_formats import TrajectoryFormatError, parse_trajectory

FIXTURES = Path(__file__).parent / "fixtures"
FILES = {
    "otel": ["otel/agents.otlp.jsonl", "otel/deprecated_events.spans.jsonl"],
    "openinference": ["openinference/spans.jsonl", "openinference/otlp.jsonl", "openinference/phoenix_dataframe.jsonl"],
    "langsmith": ["langsmith/agents.jsonl"],
    "langfuse": ["langfuse/agents.jsonl", "langfuse/no_agent.jsonl"],
}
ODD_VALUES = [None, 0, -1, 2**70, 1.5, True, "", "x", "0", [], [None], {}, {"": None}, [[[]]], "\u0000", "🙂" * 3]
MUTATIONS_PER_FILE = 150


def _paths(value, path=()):
    """Every (path, value) inside a decoded line."""
    yield path, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*path, i))


def _mutate(obj, rng: random.Random):
    obj = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p, _ in _paths(obj) if p]
        if not paths:
            return copy.deepcopy(rng.choice(ODD_VALUES))
        path = rng.choice(paths)
        parent = obj
        for part in path[:-1]:
            parent = parent[part]
        action = rng.random()
        if action < 0.25 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action < 0.35:
            parent[path[-1]] = {"nested": [[{"deep": [[["x"]]]}]]}
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
    return obj


def _read(lines: list[str], fmt: str) -> None:
    """The import's reading: every result is trajectories or a reason; anything raised is a bug."""
    for result in read_traces(enumerate((line.encode() for line in lines), start=1), fmt):
        assert result.error or result.skipped or result.trajectories
        for obj, dropped in result.trajectories:
            assert isinstance(dropped, dict)
            try:
                parse_trajectory(obj, format="canonical")
            except TrajectoryFormatError:
                pass  # refused by the schema check, with its reason: the import reports it


@pytest.mark.parametrize("fmt", TRACE_FORMATS)
def test_mutated_exports_are_imported_or_refused_never_crash(fmt, monkeypatch):
    def unforeseen(exc):  # the converters name every shape they refuse: the safety net stays unused
        raise exc

    monkeypatch.setattr(reading, "_unexpected", unforeseen)
    rng = random.Random(f"hostile-{fmt}")
    for name in FILES[fmt]:
        lines = (FIXTURES / name).read_text().splitlines()
        decoded = [json.loads(line) for line in lines]
        detected = "otlp" if detect_trace_format(decoded[0]) == "otlp" else fmt
        for _ in range(MUTATIONS_PER_FILE):
            i = rng.randrange(len(decoded))
            mutated = list(lines)
            mutated[i] = json.dumps(_mutate(decoded[i], rng))
            try:
                _read(mutated, detected)
                _read(mutated, fmt)
            except Exception as exc:  # pragma: no cover - the message names the input that broke it
                pytest.fail(f"{name}, line {i + 1} mutated to {mutated[i][:400]}: {type(exc).__name__}: {exc}")


def test_a_shape_no_converter_foresaw_is_refused_not_raised(monkeypatch):
    def convert(records):
        raise TypeError("unhashable type: 'dict'")

    monkeypatch.setattr(reading.module("langsmith"), "convert", convert)
    lines = (FIXTURES / "langsmith/agents.jsonl").read_bytes().splitlines()
    results = list(read_traces(enumerate(lines, start=1), "langsmith"))
    assert results and all(r.error for r in results)
    assert "a record of a shape this format does not have (TypeError: unhashable type: 'dict')" in results[0].error


# JSON inside a string (tool arguments, message lists, metadata, attributes) holding what the
# outer parser cannot see: the strict decoder must refuse it, with the line, before the database.
NESTED_HOSTILE = ['{"q": NaN}', '{"q": "\\ud800"}', '{"q": "a\\u0000b"}', '{"q": 1e400}', "[" * 200 + "]" * 200]


def _json_strings(value, path=()):
    """The places in a decoded line whose value is a string holding a JSON object or list."""
    if isinstance(value, str):
        if value.lstrip()[:1] in ("{", "["):
            yield path
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from _json_strings(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _json_strings(inner, (*path, i))


@pytest.mark.django_db
@pytest.mark.parametrize("name", [n for names in FILES.values() for n in names if n != "langfuse/no_agent.jsonl"])
def test_hostile_json_inside_strings_is_refused_through_the_database_insert(name):
    """All the way through `trajectories_import_stream` (the insert included): a named
    refusal or a stored trajectory, never an IntegrityError or UnicodeEncodeError."""
    import io

    from annotate.models import Trajectory
    from annotate.services.imports import trajectories_import_stream
    from webapp.errors import ArbiterError

    lines = (FIXTURES / name).read_text().splitlines()
    fmt = next(f for f, names in FILES.items() if name in names)
    places = [(i, p) for i, line in enumerate(lines) for p in _json_strings(json.loads(line))]
    assert places, f"{name} has no JSON inside a string to corrupt"
    for i, path in places[:12]:
        for hostile in NESTED_HOSTILE:
            decoded = json.loads(lines[i])
            parent = decoded
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = hostile
            mutated = list(lines)
            mutated[i] = json.dumps(decoded)
            before = Trajectory.objects.count()
            try:
                trajectories_import_stream(stream=io.BytesIO("\n".join(mutated).encode()), format=fmt)
            except ArbiterError as exc:
                assert "line" in exc.message, exc.message
                assert Trajectory.objects.count() == before  # all or nothing
            for text in Trajectory.objects.values_list("answer", flat=True):
                assert "\ud800" not in text and "\x00" not in text
