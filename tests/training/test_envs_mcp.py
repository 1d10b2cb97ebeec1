"""An environment whose tools come from a real MCP server that the test starts (stdio)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import MCP_CALCULATOR_SERVER, mcp_arithmetic_tasks
from training.envs.base import EpisodeRunner, Limits
from training.envs.mcp import MCPEnvironmentError
from training.envs.registry import get_environment

SERVER = MCP_CALCULATOR_SERVER


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory):
    return mcp_arithmetic_tasks(tmp_path_factory.mktemp("mcp") / "tasks.jsonl")


@pytest.fixture(scope="module")
def env(tasks_file):
    environment = get_environment("mcp", server=SERVER, tasks=str(tasks_file))
    yield environment
    environment.close()


def test_the_tools_and_their_schemas_come_from_the_server(env):
    tools = {t.name: t for t in env.tools()}
    assert set(tools) == {"calculate_expression", "calculate", "answer"}  # the server's, and Arbiter's answer tool
    schema = tools["calculate_expression"].parameters
    assert schema["properties"]["expression"]["type"] == "string" and schema["required"] == ["expression"]
    assert "48 * 17 - 95" in tools["calculate_expression"].description


def test_episodes_call_the_server_and_are_scored_by_the_tasks_reference(env):
    task = env.tasks("eval")[0]
    runner = EpisodeRunner(env, Limits(max_steps=6))
    episode = runner.start(task)
    assert episode.call("calculate_expression", {"expression": "48 * 17 - 95"}).content == "721"
    failed = episode.call("calculate_expression", {"expression": "1 / 0"})
    assert failed.error and "division by zero" in failed.content
    refused = episode.call("calculate_expression", {"expr": "1"})  # fails the server's schema: never sent
    assert refused.error and "bad arguments" in refused.content
    episode.call("answer", {"text": task.reference})
    outcome = episode.outcome()
    assert outcome.correct and outcome.parts == {
        "steps": 4,
        "tool_errors": 2,
        "loop": False,
        "answered": True,
        "truncated": False,
    }
    stored = episode.trajectory(agent="mcp-agent")
    assert stored["metadata"]["tools"][0]["function"]["name"] == "calculate_expression"
    wrong = runner.start(task)
    wrong.call("answer", {"text": "no idea"})
    assert not wrong.outcome().correct


def test_a_rubric_hook_by_dotted_path(tasks_file):
    env = get_environment("mcp", server=SERVER, tasks=str(tasks_file), rubric="tests.training.test_envs_mcp:lenient")
    try:
        episode = EpisodeRunner(env).start(env.tasks("train")[0])
        episode.call("answer", {"text": "anything"})
        assert episode.outcome().correct and episode.outcome().parts["hook"] is True
    finally:
        env.close()


def lenient(task, episode):
    from training.envs.base import Rubric

    return Rubric(correct=episode.answer is not None, utility=1.0, parts={"hook": True})


def test_bad_tasks_and_unreachable_servers_are_refused_with_the_reason(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"prompt": "no id"}\n{"external_id": "x", "prompt": "p", "split": "test", "reference": "r"}\n'
        '{"external_id": "y", "prompt": "p"}\n{"external_id": "z", "prompt": "p", "split": "dev", '
        '"reference": "r", "aliases": "r"}\n'
    )
    with pytest.raises(MCPEnvironmentError) as caught:
        get_environment("mcp", server=SERVER, tasks=str(bad))
    message = str(caught.value)
    assert "line 1: no external_id, split, reference" in message and "line 2: split must be" in message
    assert "line 3: no split, reference (a task without a reference can never be answered right" in message
    assert "line 4: aliases must be a list of strings" in message
    good = tmp_path / "good.jsonl"
    good.write_text('{"external_id": "x", "prompt": "p", "split": "train", "reference": "r"}\n')
    with pytest.raises(MCPEnvironmentError, match="cannot connect"):
        get_environment("mcp", server=[sys.executable, "-c", "import sys; sys.exit(3)"], tasks=str(good), timeout=10)


def test_a_stdio_server_starts_when_this_process_stderr_has_no_file_descriptor(tasks_file):
    """What a Celery worker does: sys.stderr replaced by a logging proxy without `fileno` before
    the MCP SDK is first imported (its default errlog is bound then). In a fresh process, as
    on a worker; the server's stderr now goes to a file of its own."""
    import subprocess

    code = f"""
import sys
class LoggingProxy:  # as celery.utils.log.LoggingProxy: writes, but no file descriptor
    def write(self, text): return len(text)
    def flush(self): pass
real = sys.__stdout__
sys.stderr = LoggingProxy()
from training.envs.registry import get_environment
env = get_environment("mcp", server={SERVER!r}, tasks={str(tasks_file)!r})
real.write(",".join(sorted(t.name for t in env.tools())))
env.close()
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout[-1000:], done.stderr[-2000:])
    assert "calculate" in done.stdout


def test_a_server_that_fails_to_start_says_why(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"external_id": "x", "prompt": "p", "reference": "r", "split": "train"}\n')
    crash = "import sys; sys.stderr.write('ModuleNotFoundError: No module named mcp_thing'); sys.exit(3)"
    with pytest.raises(MCPEnvironmentError, match="the server said: ModuleNotFoundError: No module named mcp_thing"):
        get_environment("mcp", server=[sys.executable, "-c", crash], tasks=str(good), timeout=10)


def _crashing(tasks_file, crash_after: int, restarts: int):
    import os

    env = dict(os.environ, ARBITER_TEST_CRASH_AFTER=str(crash_after))
    return get_environment("mcp", server=SERVER, tasks=str(tasks_file), server_env=env, restarts=restarts, timeout=10)


def test_a_server_that_dies_is_restarted_and_the_call_goes_through(tasks_file):
    environment = _crashing(tasks_file, crash_after=2, restarts=3)
    try:
        results = [environment.call(None, "calculate", {"expression": "6 * 7"}) for _ in range(5)]
        assert [r.content for r in results] == ["42"] * 5 and not any(r.error for r in results)
        assert environment.restarts == 2  # it died on its 3rd call, then on the 3rd call of its second life
    finally:
        environment.close()


def test_a_server_that_keeps_dying_ends_the_run_never_an_agent_error(tasks_file):
    from training.envs.base import ToolServerLost

    environment = _crashing(tasks_file, crash_after=0, restarts=2)
    try:
        with pytest.raises(ToolServerLost, match="stopped answering .* restarted 2 time"):
            environment.call(None, "calculate", {"expression": "1 + 1"})
    finally:
        environment.close()


def test_exact_match_accepts_the_tasks_aliases(tmp_path):
    from training.envs.base import EpisodeRecord
    from training.envs.mcp import exact_match_rubric, load_tasks_jsonl

    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"external_id": "x", "prompt": "Capital of France?", "reference": "Paris", '
        '"aliases": ["Paris, France", "the city of Paris"], "split": "eval"}\n'
    )
    (task,) = load_tasks_jsonl(path)
    for answer, right in (("paris", True), ("Paris, France.", True), ("The city of Paris", True), ("Lyon", False)):
        episode = EpisodeRecord(task=task, answer=answer, calls=1, tool_errors=0, loop=False)
        assert exact_match_rubric(task, episode).correct is right, answer


def _server_env(**extra) -> dict:
    import os

    return dict(os.environ, **extra)


def test_a_server_that_never_answers_initialize_is_refused_within_the_start_timeout(tasks_file):
    import time

    started = time.monotonic()
    with pytest.raises(MCPEnvironmentError, match=r"no answer to the MCP handshake within start_timeout \(2 s;"):
        get_environment(
            "mcp", server=SERVER, tasks=str(tasks_file), server_env=_server_env(ARBITER_TEST_HANG="1"), start_timeout=2
        )
    # 2 s, then the server is stopped (2 s grace, then signals); the SDK's own discover probe alone waits 10 s
    assert time.monotonic() - started < 9


def test_a_command_that_does_not_exist_is_named(tasks_file):
    with pytest.raises(
        MCPEnvironmentError,
        match=r"cannot run the MCP server command '/no/such/server': "
        r"No such file or directory",
    ):
        get_environment("mcp", server=["/no/such/server", "--stdio"], tasks=str(tasks_file), start_timeout=5)


def test_the_servers_instructions_are_the_system_prompt_unless_the_config_gives_one(tasks_file):
    said = "Use calculate for every step of the arithmetic; answer with the number only."
    env = get_environment(
        "mcp", server=SERVER, tasks=str(tasks_file), server_env=_server_env(ARBITER_TEST_INSTRUCTIONS=said)
    )
    try:
        task = env.tasks("train")[0]
        assert env.opening_messages(task)[0] == {"role": "system", "content": said}
        assert env.system_prompt_source == "server"
    finally:
        env.close()
    own = get_environment(
        "mcp",
        server=SERVER,
        tasks=str(tasks_file),
        system_prompt="Be brief.",
        server_env=_server_env(ARBITER_TEST_INSTRUCTIONS=said),
    )
    try:
        assert own.opening_messages(own.tasks("train")[0])[0]["content"] == "Be brief."
    finally:
        own.close()


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    import os
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of ours counts as gone
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def test_a_server_does_not_outlive_its_host_when_the_host_is_killed(tasks_file, tmp_path):
    """The SDK starts a stdio server in a session of its own; a worker killed with SIGKILL used
    to leave its (possibly hung) server running for ever."""
    import os
    import signal
    import subprocess

    pid_file = tmp_path / "server.pid"
    code = f"""
import os, sys, time
from training.envs.registry import get_environment
env = get_environment("mcp", server={SERVER!r}, tasks={str(tasks_file)!r},
                      server_env=dict(os.environ, ARBITER_TEST_PID_FILE={str(pid_file)!r}))
print("ready", flush=True)
time.sleep(120)
"""
    root = Path(__file__).resolve().parents[2]
    host = subprocess.Popen([sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout.readline().strip() == "ready"
        server_pid = int(pid_file.read_text())
        os.kill(server_pid, 0)  # alive while its host is
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=30)
        assert _wait_gone(server_pid), "the MCP server outlived its killed host"
    finally:
        host.kill()


def test_a_dead_cached_server_is_started_again_before_a_launch_check_passes(tasks_file, tmp_path, settings):
    import os
    import signal

    from training.envs.services import environment_get, environment_problems

    pid_file = tmp_path / "server.pid"
    settings.ARBITER_ENVIRONMENTS = {
        "calc-mcp-cached": {
            "class": "mcp",
            "options": {
                "server": SERVER,
                "tasks": str(tasks_file),
                "server_env": _server_env(ARBITER_TEST_PID_FILE=str(pid_file)),
            },
        }
    }
    first = environment_get("calc-mcp-cached")
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        assert _wait_gone(int(pid_file.read_text()))
        assert not first.alive()
        assert environment_problems("calc-mcp-cached") == []
        second = environment_get("calc-mcp-cached")
        assert second is not first and second.alive()
        assert second.call(None, "calculate", {"expression": "2 + 3"}).content == "5"
    finally:
        environment_get("calc-mcp-cached").close()


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("Children’s Wing", "Children's Wing"),
        ("childrens wing", "Children’s Wing"),
        ("José Ñúñez", "Jose Nunez"),
        ("«Zoë»", "Zoe"),
        ("STRASSE", "straße"),
    ],
)
def test_the_default_rubric_matches_across_unicode_punctuation_and_accents(answer, reference):
    """Issue 45: exact match normalises what a person reads as the same answer."""
    from training.envs.base import EnvTask
    from training.envs.mcp import exact_match_rubric

    task = EnvTask(external_id="t", prompt="q", reference=reference, split="eval")
    episode = SimpleNamespace(answer=answer, calls=1, tool_errors=0, loop=False)
    assert exact_match_rubric(task, episode).correct
    assert not exact_match_rubric(
        task, SimpleNamespace(answer="someone else", calls=1, tool_errors=0, loop=False)
    ).correct


def _script(code: str, *, env: dict | None = None, timeout: float = 90):
    """Run `code` in a fresh interpreter from the repository root, as a user's plain script runs."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root), **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_docs_example_without_close_exits(tasks_file, tmp_path):
    """Issue 53: a script that used an MCP environment and never called close() hung for ever at
    exit (the portal's thread was frozen while the unclosed portal waited on it). It now ends at
    once, and its server with it."""
    import time

    pid_file = tmp_path / "server.pid"
    code = f"""
import os
from training.envs.registry import get_environment
env = get_environment("mcp", server={SERVER!r}, tasks={str(tasks_file)!r},
                      server_env=dict(os.environ, ARBITER_TEST_PID_FILE={str(pid_file)!r}))
print(env.call(None, "calculate", {{"expression": "48 * 17 - 95"}}).content, flush=True)
"""
    script = _script(code)
    try:
        out, err = script.communicate(timeout=60)
    except Exception:
        script.kill()
        raise AssertionError("a script that never called close() did not exit within 60 s") from None
    assert script.returncode == 0, err[-2000:]
    assert out.strip() == "721"
    started = time.monotonic()
    assert _wait_gone(int(pid_file.read_text()), seconds=10), "the script's MCP server outlived it"
    assert time.monotonic() - started < 10


def test_with_closes_the_environment_and_its_server(tasks_file, tmp_path):
    import gc

    pid_file = tmp_path / "server.pid"
    with get_environment(
        "mcp", server=SERVER, tasks=str(tasks_file), server_env=_server_env(ARBITER_TEST_PID_FILE=str(pid_file))
    ) as env:
        assert env.call(None, "calculate", {"expression": "6 * 7"}).content == "42"
        assert env.alive()
    assert not env.alive()
    assert _wait_gone(int(pid_file.read_text())), "leaving `with` did not stop the server"
    env.close()  # a second close does nothing
    # One dropped without close() is closed when it is collected, not left running until exit.
    dropped = get_environment(
        "mcp", server=SERVER, tasks=str(tasks_file), server_env=_server_env(ARBITER_TEST_PID_FILE=str(pid_file))
    )
    del dropped
    gc.collect()
    assert _wait_gone(int(pid_file.read_text())), "a collected environment left its server running"


def test_two_processes_starting_a_slow_server_at_once_succeed_with_the_start_timeout_setting(tasks_file):
    """Issue 53: two processes starting a server at once on a busy machine ran past the fixed
    10 s start. The server here takes 11 s to start (what a loaded machine did); with
    ARBITER_MCP_START_TIMEOUT both start."""
    code = f"""
import os
from training.envs.registry import get_environment
with get_environment("mcp", server={SERVER!r}, tasks={str(tasks_file)!r}, server_env=dict(os.environ)) as env:
    print(env.call(None, "calculate", {{"expression": "2 + 3"}}).content, flush=True)
"""
    setting = {"ARBITER_MCP_START_TIMEOUT": "60", "ARBITER_TEST_START_DELAY": "11"}
    scripts = [_script(code, env=setting) for _ in range(2)]
    done = [s.communicate(timeout=90) for s in scripts]
    for script, (out, err) in zip(scripts, done, strict=True):
        assert script.returncode == 0, err[-2000:]
        assert out.strip() == "5"


def test_a_start_past_the_setting_is_refused_naming_the_setting(tasks_file, monkeypatch):
    import time

    monkeypatch.setenv("ARBITER_MCP_START_TIMEOUT", "1.5")
    started = time.monotonic()
    with pytest.raises(MCPEnvironmentError) as caught:
        get_environment(
            "mcp", server=SERVER, tasks=str(tasks_file), server_env=_server_env(ARBITER_TEST_START_DELAY="20")
        )
    message = str(caught.value)
    assert "no answer to the MCP handshake within start_timeout (1.5 s" in message
    assert "ARBITER_MCP_START_TIMEOUT" in message and "`start_timeout` option" in message
    assert time.monotonic() - started < 9
    monkeypatch.setenv("ARBITER_MCP_START_TIMEOUT", "soon")
    with pytest.raises(MCPEnvironmentError, match="ARBITER_MCP_START_TIMEOUT='soon': give a number of seconds"):
        get_environment("mcp", server=SERVER, tasks=str(tasks_file))
