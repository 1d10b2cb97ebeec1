"""An MCP server over stdio serving the arithmetic environment's calculator (test_envs_mcp.py,
test_bring_your_own.py).

    python tests/training/mcp_calculator_server.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from training.envs.arithmetic import CalculatorError, _format, calculate as evaluate  # noqa: E402

server = MCPServer("arbiter-calculator")


@server.tool()
def calculate_expression(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 48 * 17 - 95."""
    try:
        return _format(evaluate(expression))
    except CalculatorError as exc:
        raise ToolError(str(exc)) from None


@server.tool()
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression (the arithmetic environment's own tool, served over MCP)."""
    return calculate_expression(expression)


if __name__ == "__main__":
    server.run("stdio")
