"""An outside program: LangChain's ChatOpenAI (langchain-openai) against `manage.py
serve_policy`, run by tests/training/test_agent_clients.py as `python
tests/training/langchain_roundtrip.py URL MODEL REQUEST.json`. REQUEST.json holds
{"instructions", "task", "tool_result"}. The arithmetic environment's `calculate` tool is bound
(`bind_tools`); the model's call is answered with a ToolMessage and the chat goes on; the
same request is streamed and its tool-call chunks put together. Prints one JSON line."""

import json
import sys

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

url, model, path = sys.argv[1:4]
spec = json.loads(open(path).read())


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 48 * 17 - 95."""
    return spec["tool_result"]


llm = ChatOpenAI(
    base_url=url + "/v1", api_key="test-key", model=model, temperature=0, max_tokens=48, max_retries=0, timeout=120
).bind_tools([calculate])
messages = [SystemMessage(spec["instructions"]), HumanMessage(spec["task"])]
seen = {}
first = llm.invoke(messages)
seen["calls"] = [(c["name"], c["args"]) for c in first.tool_calls]
seen["first_finish"] = first.response_metadata.get("finish_reason")
if first.tool_calls:
    call = first.tool_calls[0]
    second = llm.invoke([*messages, first, ToolMessage(calculate.invoke(call["args"]), tool_call_id=call["id"])])
    seen["second"] = {"finish": second.response_metadata.get("finish_reason"), "calls": len(second.tool_calls)}
gathered = None
chunks = 0
for chunk in llm.stream(messages):
    chunks += 1
    gathered = chunk if gathered is None else gathered + chunk
seen["stream"] = {"chunks": chunks, "calls": [(c["name"], c["args"]) for c in gathered.tool_calls]}
print(json.dumps(seen))
