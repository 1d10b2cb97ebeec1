"""An MCP server over stdio serving the arithmetic environment's calculator (test_envs_mcp.py,
test_bring_your_own.py).

    python tests/training/mcp_calculator_server.py              # stdio
    python tests/training/mcp_calculator_server.py --http PORT  # streamable HTTP at 127.0.0.1:PORT/mcp

With ARBITER_TEST_CRASH_AFTER=N in its environment it dies (exit status 1, no answer) on its
N+1th tool call: a tool server lost mid-run. ARBITER_TEST_PID_FILE: it writes its pid there.
ARBITER_TEST_HANG=1: it never answers, not even `initialize`. ARBITER_TEST_INSTRUCTIONS: the
`instructions` it gives in its handshake. ARBITER_TEST_START_DELAY=S: it waits S seconds before
it serves (a server slow to start on a busy machine).
"""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from training.envs.arithmetic import CalculatorError, _format
from training.envs.arithmetic import calculate as evaluate

if os.environ.get("ARBITER_TEST_PID_FILE"):
    Path(os.environ["ARBITER_TEST_PID_FILE"]).write_text(str(os.getpid()))
if os.environ.get("ARBITER_TEST_HANG"):
    import time

    while True:
        time.sleep(60)
if os.environ.get("ARBITER_TEST_START_DELAY"):
    import time

    time.sleep(float(os.environ["ARBITER_TEST_START_DELAY"]))

server = MCPServer("arbiter-calculator", instructions=os.environ.get("ARBITER_TEST_INSTRUCTIONS") or None)
_CRASH_AFTER = os.environ.get("ARBITER_TEST_CRASH_AFTER")
_calls = 0


def _maybe_crash() -> None:
    global _calls
    _calls += 1
    if _CRASH_AFTER is not None and _calls > int(_CRASH_AFTER):
        os._exit(1)


@server.tool()
def calculate_expression(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 48 * 17 - 95."""
    _maybe_crash()
    try:
        return _format(evaluate(expression))
    except CalculatorError as exc:
        raise ToolError(str(exc)) from None


@server.tool()
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression (the arithmetic environment's own tool, served over MCP)."""
    return calculate_expression(expression)


if __name__ == "__main__":
    if "--http" in sys.argv:  # streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run("stdio")
