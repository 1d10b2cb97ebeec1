"""An outside program: the OpenAI Agents SDK (openai-agents) against `manage.py serve_policy`,
run by tests/training/test_agent_clients.py as `python tests/training/agents_sdk_roundtrip.py
URL MODEL REQUEST.json`. REQUEST.json holds {"instructions", "task"}. An agent with the
arithmetic environment's `calculate` tool bound (a Python function the SDK calls) runs on chat
completions, once to its end and once streamed. Prints one JSON line of what it saw."""

import asyncio
import json
import sys

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

url, model, path = sys.argv[1:4]
spec = json.loads(open(path).read())
set_tracing_disabled(True)  # nothing leaves the machine
seen = {"tool_inputs": [], "stream_events": []}


@function_tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 48 * 17 - 95.

    Args:
        expression: the expression.
    """
    seen["tool_inputs"].append(expression)
    return "42"


async def main() -> None:
    client = AsyncOpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0, timeout=120)
    agent = Agent(
        name="calculator",
        instructions=spec["instructions"],
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        model_settings=ModelSettings(temperature=0, max_tokens=48),
        tools=[calculate],
    )
    result = await Runner.run(agent, spec["task"], max_turns=3)
    seen["items"] = [item.type for item in result.new_items]
    seen["final"] = result.final_output
    streamed = Runner.run_streamed(agent, spec["task"], max_turns=3)
    async for event in streamed.stream_events():
        if event.type == "run_item_stream_event":
            seen["stream_events"].append(event.item.type)
        elif event.type == "raw_response_event" and "delta" in event.data.type:
            seen.setdefault("deltas", 0)
            seen["deltas"] += 1
    seen["stream_final"] = streamed.final_output


try:
    asyncio.run(main())
except Exception as exc:  # what the SDK raised is part of what it saw (max turns, a refusal)
    seen["error"] = f"{type(exc).__name__}: {exc}"[:500]
print(json.dumps(seen))
