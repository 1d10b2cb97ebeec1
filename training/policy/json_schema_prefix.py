"""Constrained decoding held to a JSON Schema, not only to JSON: the served policy's
`response_format` json_schema, character by character (plain Python).

`SchemaPrefix` reads characters as `JsonPrefix` does (training/policy/json_constraint.py) and
also says whether they can still begin an object valid against the schema, for the parts of
JSON Schema a structured answer is made of:

- objects: `properties`, `required` (the object may close only once they are written),
  `additionalProperties: false` (a key must be one of the properties not yet written; no key
  twice in any object);
- values: `type` (one or a list), `enum` and `const`, integer (no fraction or exponent) and
  the bounds `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`;
- arrays: `items`.

Anything else (`anyOf`, `$ref`, `pattern`, lengths, counts) is left open while generating and
checked on the finished reply, as before (serving.py). A small model asked for a verdict then
writes the verdict's own keys and one of its words, not the schema's shape back.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from core.ids import ascii_digits
from training.policy.json_constraint import SPACE, JsonPrefix

_STARTS = {'"': "string", "{": "object", "[": "array", "t": "boolean", "f": "boolean", "n": "null"}


def _types(schema: Any) -> set[str] | None:
    """The JSON types a value of the schema may have (None: any). "integer" counts as a number."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return set(kind)
    return None


def _choices(schema: Any) -> list | None:
    """The values `enum` or `const` allow (None: no such list)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    return list(schema["enum"]) if isinstance(schema.get("enum"), list) else None


def _encoded(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _starts_ok(schema: Any, char: str) -> bool:
    choices = _choices(schema)
    if choices is not None:
        return any(_encoded(choice).startswith(char) for choice in choices)
    types = _types(schema)
    if types is None:
        return True
    kind = _STARTS.get(char, "number")
    return kind in types or (kind == "number" and "integer" in types)


def _number_ok(schema: Any, word: str, final: bool) -> bool:
    """Whether a number being written (`final`: written whole) can still meet the schema."""
    types = _types(schema)
    integer = types is not None and "integer" in types and "number" not in types
    if integer and any(c in word for c in ".eE"):
        return False
    if not isinstance(schema, dict):
        return True
    low = [schema[k] for k in ("minimum", "exclusiveMinimum") if _is_number(schema.get(k))]
    high = [schema[k] for k in ("maximum", "exclusiveMaximum") if _is_number(schema.get(k))]
    if final:
        value = float(word)
        return (
            math.isfinite(value)
            and value >= schema.get("minimum", -math.inf)
            and value <= schema.get("maximum", math.inf)
            and value > schema.get("exclusiveMinimum", -math.inf)
            and value < schema.get("exclusiveMaximum", math.inf)
        )
    digits = word.lstrip("-")
    if not ascii_digits(digits):
        return not (word == "-" and low and min(low) >= 0)
    # Digits only: more digits only move the value away from zero.
    value = int(word)
    if word.startswith("-"):
        return not (low and value < max(low))
    return not (high and value > min(high))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _word_ok(schema: Any, word: str, final: bool) -> bool:
    """Whether a literal or number being written can still be a value of the schema."""
    choices = _choices(schema)
    if choices is not None:
        encoded = [_encoded(c) for c in choices if not isinstance(c, str)]
        return any(e == word if final else e.startswith(word) for e in encoded)
    types = _types(schema)
    if word[0] in "tfn":
        return types is None or _STARTS[word[0]] in types
    return _number_ok(schema, word, final)


def _string_ok(schema: Any, text: str, final: bool) -> bool:
    """Whether a string being written (its JSON text between the quotes) can still meet `enum`/`const`."""
    choices = _choices(schema)
    if choices is None:
        return True
    encoded = [_encoded(c)[1:-1] for c in choices if isinstance(c, str)]
    return any(e == text if final else e.startswith(text) for e in encoded)


@dataclass(frozen=True)
class _Frame:
    """An open object or array: its schema and, for an object, the keys written so far."""

    schema: Any
    used: tuple[str, ...] = ()

    @property
    def properties(self) -> dict:
        found = self.schema.get("properties") if isinstance(self.schema, dict) else None
        return found if isinstance(found, dict) else {}

    @property
    def closed(self) -> bool:
        """additionalProperties false: only the listed properties."""
        return isinstance(self.schema, dict) and self.schema.get("additionalProperties") is False

    def free_keys(self) -> list[str]:
        return [k for k in self.properties if k not in self.used]

    def key_ok(self, text: str, final: bool) -> bool:
        if final and text in self.used:
            return False
        if not self.closed:
            return True
        names = [_encoded(k)[1:-1] for k in self.free_keys()]
        return any(n == text if final else n.startswith(text) for n in names)

    def value_schema(self, key: str) -> Any:
        if key in self.properties:
            return self.properties[key]
        extra = self.schema.get("additionalProperties") if isinstance(self.schema, dict) else None
        return extra if isinstance(extra, dict) else {}

    def may_close(self) -> bool:
        required = self.schema.get("required") if isinstance(self.schema, dict) else None
        return all(k in self.used for k in (required if isinstance(required, list) else []))

    def may_go_on(self) -> bool:
        return not self.closed or bool(self.free_keys())

    def items(self) -> Any:
        found = self.schema.get("items") if isinstance(self.schema, dict) else None
        return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class SchemaPrefix:
    """Where a writer of one JSON object valid against `schema` is. Immutable, like JsonPrefix:
    `feed` returns the next state, or None when the text cannot continue such an object."""

    schema: Any
    json: JsonPrefix = JsonPrefix()
    frames: tuple[_Frame, ...] = ()
    pending: Any = None  # the schema of the value expected next, or of the string or word being written
    text: str = ""  # the key, string value or word written so far

    @property
    def complete(self) -> bool:
        return self.json.complete

    def feed(self, text: str) -> SchemaPrefix | None:
        state: SchemaPrefix | None = self
        for char in text:
            state = state._char(char)
            if state is None:
                return None
        return state

    def _char(self, char: str) -> SchemaPrefix | None:
        j = self.json
        if j.string:
            return self._in_string(char)
        if j.word:
            return self._in_word(char)
        after = j._char(char)
        if after is None:
            return None
        if char in SPACE:
            return replace(self, json=after)
        if j.expect == "start":
            return replace(self, json=after, frames=(_Frame(self.schema),))
        if j.expect == "value":
            return self._value(char, after)
        frame = self.frames[-1]
        if char == '"':  # a key begins
            return replace(self, json=after, text="") if frame.may_go_on() else None
        if char == ",":
            if j.stack[-1] == "[":
                return replace(self, json=after, pending=frame.items())
            return replace(self, json=after) if frame.may_go_on() else None
        if char == ":":
            return replace(self, json=after)
        return self._closed(after) if j.stack[-1] == "[" or frame.may_close() else None

    def _closed(self, after: JsonPrefix) -> SchemaPrefix:
        """A container closed: its parent goes on."""
        return replace(self, json=after, frames=self.frames[:-1], pending=None)

    def _value(self, char: str, after: JsonPrefix) -> SchemaPrefix | None:
        schema = self.pending
        if char == "]":  # an empty array closed
            return self._closed(after)
        if not _starts_ok(schema, char):
            return None
        if char == "{":
            return replace(self, json=after, frames=(*self.frames, _Frame(schema)), pending=None)
        if char == "[":
            frame = _Frame(schema)
            return replace(self, json=after, frames=(*self.frames, frame), pending=frame.items())
        if char == '"':
            return replace(self, json=after, text="")
        return replace(self, json=after, text=char) if _word_ok(schema, char, final=False) else None

    def _in_string(self, char: str) -> SchemaPrefix | None:
        j = self.json
        after = j._char(char)
        if after is None:
            return None
        key = j.string == "key"
        frame = self.frames[-1]
        if after.string:  # still inside
            if not key and _choices(self.pending) is None:
                return replace(self, json=after)  # free text: nothing to keep (a long rationale stays cheap)
            text = self.text + char
            if key and frame.closed and char == "\\":
                return None  # a listed key is written plainly
            ok = frame.key_ok(text, final=False) if key else _string_ok(self.pending, text, final=False)
            return replace(self, json=after, text=text) if ok else None
        if key:
            if not frame.key_ok(self.text, final=True):
                return None
            frames = (*self.frames[:-1], replace(frame, used=(*frame.used, self.text)))
            return replace(self, json=after, frames=frames, pending=frame.value_schema(self.text), text="")
        if not _string_ok(self.pending, self.text, final=True):
            return None
        return replace(self, json=after, pending=None, text="")

    def _in_word(self, char: str) -> SchemaPrefix | None:
        j = self.json
        after = j._char(char)
        if after is None:
            return None
        if after.word:
            return replace(self, json=after, text=after.word) if _word_ok(self.pending, after.word, False) else None
        if not _word_ok(self.pending, j.word, final=True):
            return None
        ended = replace(self, json=replace(j, word="", expect="next"), pending=None, text="")
        return ended._char(char)
