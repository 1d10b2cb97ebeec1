"""The benchmark's trace generators (benchmarks/trace_generators/) write, in each format, the
very trajectories of benchmarks/import_trajectories.py's `make_line`: checked through the real
reading pipeline, so the import benchmark compares like with like."""

import importlib.util
import json
from pathlib import Path

import pytest

from annotate.trace_formats.reading import TRACE_FORMATS, read_traces
from annotate.trajectory_formats import parse_trajectory

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fmt", TRACE_FORMATS)
def test_each_generator_gives_make_lines_trajectories(fmt):
    make_line = _load(BENCHMARKS / "import_trajectories.py").make_line
    generator = _load(BENCHMARKS / "trace_generators" / f"{fmt}.py")
    # Two traces, their records interleaved as the benchmark writes them.
    first, second = generator.trace_lines(5, 4), generator.trace_lines(6, 4)
    lines = [line for pair in zip(first, second) for line in pair] + first[len(second) :] + second[len(first) :]
    results = list(read_traces(enumerate((line.encode() for line in lines), start=1), fmt))
    assert [r.error for r in results] == ["", ""]
    for i, result in zip((5, 6), results):
        [(obj, dropped)] = result.trajectories
        parsed, expected = parse_trajectory(obj, format="canonical"), json.loads(make_line(i, 4))
        # Call ids are the format's own where it writes them; no trace format carries an answer's quotes.
        steps = [{k: v for k, v in step.items() if k != "call_id"} for step in parsed.steps]
        assert steps == [{k: v for k, v in step.items() if k != "quotes"} for step in expected["steps"]]
        assert (parsed.task["prompt"], parsed.agent) == (expected["task"]["prompt"], expected["agent"])
        assert dropped == {}
