"""The OpenAI Agents SDK and LangChain, each as an outside program with a tool bound, against a
policy served by `manage.py serve_policy`'s server (training/policy/serving_http.py): the cloned
calculator policy calls the tool, the framework runs it and sends the result back, and the same
run streamed gives the same call."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import calculator_policy, served_policy
from training.envs.arithmetic import ArithmeticEnvironment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_policy(calculator_policy(tmp_path_factory.mktemp("clients") / "calculator"), "calculator") as url:
        yield url


def _run(program: str, url: str, tmp_path: Path) -> dict:
    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"instructions": env.system_prompt, "task": env.tasks("train")[0].prompt, "tool_result": "42"})
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "training" / program), url, "calculator", str(request)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,  # an outside program: not the project's directory
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_agents_sdk_runs_an_agent_whose_tool_the_policy_calls(served, tmp_path):
    seen = _run("agents_sdk_roundtrip.py", served, tmp_path)
    assert "error" not in seen or seen["error"].startswith("MaxTurnsExceeded"), seen
    assert seen["tool_inputs"] and all(isinstance(x, str) and x for x in seen["tool_inputs"]), seen
    assert seen["items"][:2] == ["tool_call_item", "tool_call_output_item"], seen
    assert "tool_call_item" in seen["stream_events"] and "tool_call_output_item" in seen["stream_events"], seen


def test_langchain_binds_a_tool_the_policy_calls_and_streams_the_call(served, tmp_path):
    seen = _run("langchain_roundtrip.py", served, tmp_path)
    assert seen["first_finish"] == "tool_calls" and seen["calls"][0][0] == "calculate", seen
    assert isinstance(seen["calls"][0][1].get("expression"), str), seen
    assert seen["second"]["finish"] in ("tool_calls", "stop", "length"), seen
    assert seen["stream"]["chunks"] > 1 and seen["stream"]["calls"] == seen["calls"], seen
