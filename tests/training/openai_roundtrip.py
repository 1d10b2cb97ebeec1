"""An outside program: the official `openai` client against `manage.py serve_policy`, run by
tests/training/test_serve_policy.py as `python tests/training/openai_roundtrip.py URL MODEL
REQUEST.json`. REQUEST.json holds {"messages", "tools", "tool_result"}. Prints one JSON line
of what it saw: a chat with tools, the tool result sent back, a streamed call, a refusal."""

import json
import sys

import openai

url, model, path = sys.argv[1:4]
spec = json.loads(open(path).read())
client = openai.OpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0, timeout=60)
seen = {"models": [m.id for m in client.models.list().data]}

first = client.chat.completions.create(model=model, messages=spec["messages"], tools=spec["tools"], temperature=0)
choice = first.choices[0]
seen["first"] = {"finish_reason": choice.finish_reason, "content": choice.message.content}
seen["calls"] = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
seen["usage"] = first.usage.total_tokens if first.usage else None
if choice.message.tool_calls:
    call = choice.message.tool_calls[0]
    history = [
        *spec["messages"],
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": spec["tool_result"]},
    ]
    second = client.chat.completions.create(model=model, messages=history, tools=spec["tools"], temperature=0)
    seen["second"] = {
        "finish_reason": second.choices[0].finish_reason,
        "content": second.choices[0].message.content,
        "calls": [c.function.name for c in second.choices[0].message.tool_calls or []],
    }

stream = client.chat.completions.create(
    model=model, messages=spec["messages"], tools=spec["tools"], temperature=0, stream=True
)
names, reasons = [], []
for chunk in stream:
    for c in chunk.choices:
        names += [t.function.name for t in c.delta.tool_calls or [] if t.function and t.function.name]
        reasons += [c.finish_reason] if c.finish_reason else []
seen["stream"] = {"names": names, "finish": reasons}

try:
    client.chat.completions.create(model=model, messages=spec["messages"], temperature=5)
except openai.BadRequestError as exc:
    seen["refused"] = {"status": exc.status_code, "message": exc.body.get("message") if exc.body else str(exc)}
print(json.dumps(seen))
