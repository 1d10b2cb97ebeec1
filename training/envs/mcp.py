"""An environment whose tools are served by a Model Context Protocol server (the official `mcp` SDK).

    get_environment("mcp", server=["/srv/tools/.venv/bin/python", "/srv/tools/server.py"], tasks="t.jsonl")  # stdio
    get_environment("mcp", server="http://127.0.0.1:8765/mcp", tasks="t.jsonl")  # streamable HTTP

(A stdio command with absolute paths and the Python that has the server's packages: a worker
runs it from its own folder and PATH. Options: docs/environments.md.)

The tools and their JSON Schemas come from the server's tool list; each call goes to the
server, and a result the server marks `is_error` is an error observation. Arbiter adds an
`answer` tool (unless the server has one) that ends the episode. Tasks come from a JSONL
file (`external_id`, `prompt`, `reference`, `split`, optional `metadata`); the rubric is
normalized exact match of the answer against `reference`, or a Python hook named by
dotted path: `rubric="mypackage.grading:grade"`, a function `(task, episode) -> Rubric`.

The SDK is asynchronous; the connection runs its event loop in a thread of its own
(anyio's blocking portal), so the rest of Arbiter calls it like any other environment. An
environment is a context manager (`with get_environment("mcp", ...) as env:`); one never closed
is closed when it is collected or when the interpreter exits, so a script that forgets
`close()` still ends and leaves no server behind.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from pathlib import Path

import anyio

from training.envs.answers import normalize
from training.envs.base import Environment, EnvTask, EpisodeRecord, Rubric, Tool, ToolResult, ToolServerLost
from training.envs.utility import episode_utility

ANSWER_TOOL = Tool(
    "answer",
    "Give the final answer and end the episode.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


# What a stdio server is started under: a few lines of Python that ask Linux to kill the server
# when the Arbiter process that started it dies (PR_SET_PDEATHSIG survives exec), refuse to start
# when that process is already gone, and then exec the server's own command. The SDK starts the
# server in a session of its own, so without this a server is orphaned when its host is killed;
# a command that cannot be run is named on stderr, which the connection quotes.
_CHILD = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
except (AttributeError, OSError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("the Arbiter process that started this MCP server has exited")
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.exit(f"cannot run the MCP server command {sys.argv[2]!r}: {exc.strerror}")
"""


def _cause(exc: BaseException) -> str:
    """The innermost reason of an exception group (the SDK wraps a failed start in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class MCPEnvironmentError(ValueError):
    """The server could not be reached, or the tasks or rubric hook are not usable; the message says why."""


# How long a server has to start (launch and handshake) unless the environment's `start_timeout`
# option says otherwise. 30 s, not the SDK's 10: two processes starting a Python server at once on
# a loaded 2-core machine took longer than 10 s, and a server that exits at once is refused at
# once whatever this says; only a hung one waits it out. ARBITER_MCP_START_TIMEOUT sets it for
# every MCP environment a process starts (a worker, a command, a plain script).
START_TIMEOUT_SETTING = "ARBITER_MCP_START_TIMEOUT"
DEFAULT_START_TIMEOUT = 30.0


def start_timeout_default() -> float:
    """The start timeout from ARBITER_MCP_START_TIMEOUT (seconds), else DEFAULT_START_TIMEOUT."""
    text = os.environ.get(START_TIMEOUT_SETTING, "").strip()
    if not text:
        return DEFAULT_START_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise MCPEnvironmentError(f"{START_TIMEOUT_SETTING}={text!r}: give a number of seconds above 0")
    return seconds


def _shut(portal_cm, portal, stop, session, errlog, loop_thread: int) -> None:
    """Close one connection: let the session leave (which stops a stdio server), stop the event
    loop's thread, close the stderr file. Run by `close()`, or by the connection's finalizer when
    it is collected unclosed or the interpreter exits: at exit, before the interpreter freezes
    the (daemon) loop thread, since a portal left open then waits on that frozen thread for ever."""
    if threading.get_ident() == loop_thread:  # collected inside the loop's own thread: it cannot wait on itself
        threading.Thread(target=_shut, args=(portal_cm, portal, stop, session, errlog, -1), daemon=True).start()
        return
    try:
        if not session.done():
            portal.call(stop.set)
            futures_wait([session], timeout=15)
    except RuntimeError:  # the loop has already ended
        pass
    finally:
        portal_cm.__exit__(None, None, None)
        if errlog is not None:
            errlog.close()


class MCPConnection:
    """A synchronous handle on one MCP client session (stdio command or streamable HTTP URL)."""

    def __init__(
        self,
        server: str | list[str],
        *,
        env: dict | None = None,
        timeout: float = 30.0,
        start_timeout: float | None = None,
    ):
        import tempfile

        from anyio.from_thread import start_blocking_portal
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        start_timeout = start_timeout_default() if start_timeout is None else start_timeout
        self._errlog, self._timeout, self._start_timeout = None, timeout, start_timeout
        if isinstance(server, str) and server.startswith(("http://", "https://")):
            target = server
        else:
            command = server.split() if isinstance(server, str) else list(server)
            if not command:
                raise MCPEnvironmentError("give the MCP server's command or URL")
            # The server's stderr goes to a file of its own, never to this process's sys.stderr: a
            # Celery worker replaces that with a logging proxy that has no file descriptor (the SDK's
            # default, bound when it was imported, failed every stdio server on a worker), and the
            # file's tail explains a server that fails to start.
            self._errlog = tempfile.TemporaryFile(mode="w+", prefix="mcp-server-stderr-")
            target = stdio_client(
                StdioServerParameters(command=sys.executable, args=["-c", _CHILD, str(os.getpid()), *command], env=env),
                errlog=self._errlog,
            )
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        # Start (launch, handshake) is bounded by start_timeout as a whole: the SDK's own probe of
        # `server/discover` waits 10 s whatever the request timeout. Past it the session's task is
        # cancelled, which stops the server. Each later request but a tool call (the tool list, the
        # liveness check) is bounded by start_timeout too.
        entered: Future = Future()
        self._stop = self._portal.call(anyio.Event)
        self._session = self._portal.start_task_soon(
            self._hold, Client(target, read_timeout_seconds=start_timeout), entered, self._stop
        )
        try:
            self._client = entered.result(timeout=start_timeout)
        except Exception as exc:
            self._session.cancel()
            futures_wait([self._session], timeout=15)  # the SDK stops the server: 2 s grace, then signals
            self._portal_cm.__exit__(None, None, None)
            said = self.server_stderr()
            why = (
                f"no answer to the MCP handshake within start_timeout ({start_timeout:g} s; a server slow to "
                f"start on a busy machine needs more: the environment's `start_timeout` option, or "
                f"{START_TIMEOUT_SETTING} for every MCP environment of the process)"
                if isinstance(exc, FutureTimeout)
                else _cause(exc)
            )
            raise MCPEnvironmentError(
                f"cannot connect to the MCP server {server!r}: {why}" + (f"; the server said: {said}" if said else "")
            ) from exc
        loop_thread = self._portal.call(threading.get_ident)
        self._finalizer = weakref.finalize(
            self, _shut, self._portal_cm, self._portal, self._stop, self._session, self._errlog, loop_thread
        )

    @staticmethod
    async def _hold(client, entered: Future, stop) -> None:
        """The session's life in the portal's event loop: enter, hand the client over, wait for close."""
        try:
            await client.__aenter__()
        except BaseException as exc:
            if not entered.done():
                entered.set_exception(exc)
            raise
        entered.set_result(client)
        try:
            await stop.wait()
        finally:
            await client.__aexit__(None, None, None)

    @property
    def instructions(self) -> str:
        """What the server says about using its tools (the `instructions` of its handshake), or ""."""
        return (getattr(self._client, "instructions", None) or "").strip()

    def alive(self) -> bool:
        """Whether the server still answers a request (its tool list, past any cache, within
        start_timeout; `ping` is gone from the protocol as of 2026-07-28)."""
        try:
            self._portal.call(lambda: self._client.list_tools(cache_mode="bypass"))
            return True
        except Exception:  # noqa: BLE001 - a dead server fails in many ways; all of them mean "not alive"
            return False

    def server_stderr(self, tail: int = 2000) -> str:
        """The end of what a stdio server wrote to its stderr ("" for an HTTP server)."""
        if self._errlog is None:
            return ""
        try:
            self._errlog.flush()
            self._errlog.seek(0)
            return self._errlog.read()[-tail:].strip()
        except (OSError, ValueError):
            return ""

    def list_tools(self) -> list:
        tools, cursor = [], None
        while True:
            page = self._portal.call(lambda: self._client.list_tools(cursor=cursor))
            tools.extend(page.tools)
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                return tools

    def call_tool(self, name: str, arguments: dict):
        return self._portal.call(lambda: self._client.call_tool(name, arguments, read_timeout_seconds=self._timeout))

    def close(self) -> None:
        """Stop the session and its server; a second call does nothing."""
        self._finalizer()

    def __enter__(self) -> MCPConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _connection_lost(exc: Exception) -> bool:
    """The server is gone or stuck (closed stream, dead process, no answer in time), as opposed to
    a JSON-RPC error it sent back for this request."""
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if isinstance(exc, MCPError):
        return exc.error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    return isinstance(
        exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError, TimeoutError)
    )


def load_tasks_jsonl(path: str | Path, *, need_reference: bool = True) -> list[EnvTask]:
    """Tasks from JSONL (`external_id`, `prompt`, `split`, `reference` unless a rubric hook grades
    without one, optional `aliases` and `metadata`); every bad line is named at once. Nothing is
    defaulted silently: a line without `split` or (for exact match) `reference` is refused."""
    tasks, problems = [], []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            missing = [
                k
                for k in ("external_id", "prompt", "split") + (("reference",) if need_reference else ())
                if k not in row
            ]
            if missing:
                problems.append(
                    f"line {number}: no {', '.join(missing)}"
                    + (
                        " (a task without a reference can never be answered right under exact match; "
                        "give one, or a rubric hook)"
                        if "reference" in missing
                        else ""
                    )
                )
                continue
            aliases = row.get("aliases") or []
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                problems.append(f"line {number}: aliases must be a list of strings")
                continue
            tasks.append(
                EnvTask(
                    external_id=str(row["external_id"]),
                    prompt=str(row["prompt"]),
                    reference=str(row.get("reference", "")),
                    split=row["split"],
                    metadata={**dict(row.get("metadata") or {}), **({"aliases": aliases} if aliases else {})},
                )
            )
            if tasks[-1].split not in ("train", "dev", "eval"):
                problems.append(f"line {number}: split must be train, dev or eval")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"line {number}: {type(exc).__name__}: {exc}")
    if problems:
        raise MCPEnvironmentError(f"{path}: " + "; ".join(problems[:10]))
    return tasks


def exact_match_rubric(task: EnvTask, episode: EpisodeRecord) -> Rubric:
    """Normalized exact match against the reference or any of the task's `aliases`."""
    accepted = {normalize(text) for text in [task.reference, *task.metadata.get("aliases", [])]} - {""}
    correct = episode.answer is not None and normalize(episode.answer) in accepted
    utility = episode_utility(correct, episode)
    return Rubric(
        correct=correct,
        utility=utility,
        parts={
            "steps": episode.calls,
            "tool_errors": episode.tool_errors,
            "loop": episode.loop,
            "answered": episode.answer is not None,
        },
    )


def _hook(dotted: str) -> Callable:
    module, _, name = dotted.partition(":") if ":" in dotted else dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise MCPEnvironmentError(f"cannot import the rubric hook {dotted!r}: {exc}") from None


class MCPEnvironment(Environment):
    name = "mcp"
    description = "Tools served by an MCP server; tasks from a JSONL file."

    def __init__(
        self,
        *,
        server: str | list[str],
        tasks: str | Path,
        rubric: str | None = None,
        server_env: dict | None = None,
        timeout: float = 30.0,
        start_timeout: float | None = None,
        restarts: int = 3,
        system_prompt: str | None = None,
    ):
        self._tasks = load_tasks_jsonl(tasks, need_reference=not rubric)
        self._rubric = _hook(rubric) if rubric else exact_match_rubric
        self._server, self._server_env = server, server_env
        self._timeouts = {"timeout": timeout, "start_timeout": start_timeout}
        self.restarts_left, self.restarts = restarts, 0
        self.connection = self._connect()
        served = [
            Tool(t.name, t.description or "", t.input_schema or {"type": "object"})
            for t in self.connection.list_tools()
        ]
        self._tools = served + ([] if any(t.name == "answer" for t in served) else [ANSWER_TOOL])
        self._served = {t.name for t in served}
        # The system prompt: the config's, else the server's own instructions, else Arbiter's default.
        self.system_prompt = system_prompt or self.connection.instructions or Environment.system_prompt
        self.system_prompt_source = (
            "config" if system_prompt else ("server" if self.connection.instructions else "default")
        )

    def _connect(self) -> MCPConnection:
        return MCPConnection(self._server, env=self._server_env, **self._timeouts)

    def alive(self) -> bool:
        return self.connection.alive()

    def tasks(self, split: str) -> list[EnvTask]:
        return [t for t in self._tasks if t.split == split]

    def tools(self) -> list[Tool]:
        return list(self._tools)

    def call(self, state, tool: str, arguments: dict) -> ToolResult:
        if tool == "answer" and tool not in self._served:
            return ToolResult(arguments["text"], done=True, answer=arguments["text"])
        try:
            result = self.connection.call_tool(tool, arguments)
        except Exception as exc:
            if not _connection_lost(exc):  # the server answered, refusing this request: the agent sees why
                return ToolResult(f"Error: the tool server refused the call: {exc}", error=True)
            result = self._call_after_restart(tool, arguments, exc)
        text = "\n".join(getattr(part, "text", "") or "" for part in result.content)
        if tool == "answer":
            return ToolResult(text, done=True, answer=str(arguments.get("text", text)))
        return ToolResult(text, error=bool(result.is_error))

    def _call_after_restart(self, tool: str, arguments: dict, lost: Exception):
        """The server went away: start it again (at most `restarts` times in this environment's
        life) and repeat the call; when that fails, the run ends with ToolServerLost. A lost
        server is never stored as the agent's error."""
        said, last = self.connection.server_stderr(), lost
        while self.restarts_left > 0:
            self.restarts_left -= 1
            self.restarts += 1
            try:
                self.connection.close()
            except Exception:  # the old connection is gone either way
                pass
            try:
                self.connection = self._connect()
                return self.connection.call_tool(tool, arguments)
            except Exception as exc:
                last = exc
                said = self.connection.server_stderr() or said
        raise ToolServerLost(
            f"the MCP server {self._server!r} stopped answering ({type(lost).__name__}: {lost}); it has been "
            f"restarted {self.restarts} time(s) in this run, as many as its `restarts` setting allows (last failure: "
            f"{type(last).__name__}: {last})"
            + (f"; it said: {said[-500:]}" if said else "")
            + ". A lost tool server is not the agent's error: the "
            "run stops here."
        )

    def outcome(self, state, episode: EpisodeRecord) -> Rubric:
        return self._rubric(episode.task, episode)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> MCPEnvironment:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
