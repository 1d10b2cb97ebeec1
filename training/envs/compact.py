"""The compact action notation, `tool[ argument]`: how the encyclopedia's scripted agent writes
its actions and how the default policy writes its calls (training/policy/parsers.py reads
policy output with it). It lives with the environments because a demonstrator writes it;
the policy layer above uses it, never the other way round."""

from __future__ import annotations

import re
from typing import Any

ACTION = re.compile(r"^\s*([A-Za-z_][\w-]*)\[(.*)\]\s*$", re.S)


class NotACall(ValueError):
    """The text is not one `tool[argument]` action; the message says how to write one."""


def compact_call(text: str, tools) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of one compact action. The argument goes to the tool's first
    property, converted when its schema says integer or number; an unknown tool keeps it as
    `text` (the runner names the tools that exist). Raises NotACall."""
    match = ACTION.match(text)
    if not match:
        raise NotACall("write one action as tool[argument], e.g. search[ query].")
    name, raw = match.group(1), match.group(2).strip()
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return name, {"text": raw}
    properties = tool.parameters.get("properties", {})
    if not properties:
        return name, {}
    key, schema = next(iter(properties.items()))
    value: Any = raw
    if schema.get("type") in ("integer", "number"):
        try:
            value = int(raw) if schema["type"] == "integer" else float(raw)
        except ValueError:
            raise NotACall(f"{name} takes a {schema['type']}, not {raw!r}.") from None
    return name, {key: value}
