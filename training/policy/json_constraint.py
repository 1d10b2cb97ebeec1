"""Constrained decoding of one JSON object: the served policy's `response_format` (json_object,
json_schema), token by token.

`JsonPrefix` reads characters and says whether they can still begin a JSON object (RFC 8259:
strings with their escapes, numbers, true/false/null, nesting); `JsonConstraint` is what a
generated row (training/policy/batch_generation.py `Row.constraint`) asks before each token:
may this token come next? A token is allowed when its text keeps the reply a prefix of one JSON
object; an end-of-turn token only once the object is closed, and then nothing else. The server
tries the row's likeliest (or sampled) tokens in order until one is allowed, so the model still
chooses everything the grammar leaves open. With a json_schema the state is a
`SchemaPrefix` (training/policy/json_schema_prefix.py), which also holds the reply to the
schema's keys, types and enums while generating; the whole schema is checked on the finished
reply (serving.py).

A token is tried by its own text (decoded alone, cached): a token that is part of a character
(bytes that decode alone to U+FFFD) and special tokens other than the end of turn are never
allowed, so a reply under a JSON format holds whole characters only. Whitespace outside strings
is capped (MAX_SPACES in a row): a model that repeats newlines cannot fill its reply with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

MAX_SPACES = 16  # an indented object of a few levels, never a page of newlines
SPACE = " \t\n\r"
LITERALS = ("true", "false", "null")
# A number so far, and a whole one (RFC 8259 section 6).
NUMBER_PREFIX = re.compile(r"-?(0|[1-9]\d*)?(\.\d*)?([eE][+-]?\d*)?")
NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
HEX = set("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class JsonPrefix:
    """Where a reader of one JSON object is. Immutable: `feed` returns the next state, or None
    when the text cannot continue a JSON object."""

    stack: tuple[str, ...] = ()  # open containers, "{" or "["
    expect: str = "start"  # start, value, key, colon, next (a comma or the end), done
    first: bool = False  # just after "{" or "[": the container may close at once
    string: str = ""  # "" outside a string; "key" or "value" inside one
    escape: int = 0  # inside a string: 1 after a backslash, 2..5 reading \uXXXX's digits
    word: str = ""  # a literal or number being read
    spaces: int = 0  # whitespace characters in a row outside strings

    @property
    def complete(self) -> bool:
        return self.expect == "done" and not self.word

    def feed(self, text: str) -> JsonPrefix | None:
        state: JsonPrefix | None = self
        for char in text:
            state = state._char(char)
            if state is None:
                return None
        return state

    def _char(self, char: str) -> JsonPrefix | None:
        if self.string:
            return self._in_string(char)
        if self.word:
            return self._in_word(char)
        if char in SPACE:
            return replace(self, spaces=self.spaces + 1) if self.spaces < MAX_SPACES else None
        state = replace(self, spaces=0)
        if state.expect == "start":
            return replace(state, stack=("{",), expect="key", first=True) if char == "{" else None
        if state.expect == "key":
            if char == '"':
                return replace(state, string="key", first=False)
            return state._close(char) if state.first else None
        if state.expect == "colon":
            return replace(state, expect="value") if char == ":" else None
        if state.expect == "value":
            return state._value(char)
        if state.expect == "next":
            if char == ",":
                return replace(state, expect="key" if state.stack[-1] == "{" else "value", first=False)
            return state._close(char)
        return None  # done: nothing may follow the object

    def _close(self, char: str) -> JsonPrefix | None:
        if char != {"{": "}", "[": "]"}[self.stack[-1]]:
            return None
        stack = self.stack[:-1]
        return replace(self, stack=stack, expect="next" if stack else "done", first=False)

    def _value(self, char: str) -> JsonPrefix | None:
        if char == '"':
            return replace(self, string="value", first=False)
        if char in "{[":
            return replace(self, stack=(*self.stack, char), expect="key" if char == "{" else "value", first=True)
        if char == "]" and self.first and self.stack[-1] == "[":
            return self._close(char)
        if char in "-0123456789" or any(literal.startswith(char) for literal in LITERALS):
            return replace(self, word=char, first=False)
        return None

    def _in_string(self, char: str) -> JsonPrefix | None:
        if self.escape == 1:
            if char == "u":
                return replace(self, escape=2)
            return replace(self, escape=0) if char in '"\\/bfnrt' else None
        if self.escape >= 2:
            if char not in HEX:
                return None
            return replace(self, escape=0 if self.escape == 5 else self.escape + 1)
        if char == "\\":
            return replace(self, escape=1)
        if char == '"':
            return replace(self, string="", expect="colon" if self.string == "key" else "next")
        return self if ord(char) >= 0x20 else None  # control characters are escaped in JSON

    def _in_word(self, char: str) -> JsonPrefix | None:
        word = self.word + char
        if self.word[0] in "tfn":
            if not any(literal.startswith(word) for literal in LITERALS):
                return replace(self, word="", expect="next")._char(char) if self.word in LITERALS else None
            return replace(self, word=word)
        if NUMBER_PREFIX.fullmatch(word):
            return replace(self, word=word)
        return replace(self, word="", expect="next")._char(char) if NUMBER.fullmatch(self.word) else None


@dataclass
class JsonConstraint:
    """One row's constraint: `allows(token)` before a token is picked, `take(token)` after."""

    token_text: Callable[[int], str]  # a token's text, decoded alone
    stop_ids: list[int]
    banned: set[int] = field(default_factory=set)  # special tokens that are not an end of turn
    state: Any = field(default_factory=JsonPrefix)  # JsonPrefix, or a SchemaPrefix: `feed` and `complete`
    cache: dict[int, str] = field(default_factory=dict)

    @property
    def ends(self) -> list[int]:
        """Once the object is closed, the only tokens allowed: the end-of-turn tokens."""
        return self.stop_ids if self.state.complete else []

    def _text(self, token: int) -> str:
        if token not in self.cache:
            self.cache[token] = self.token_text(token)
        return self.cache[token]

    def allows(self, token: int) -> bool:
        if token in self.stop_ids:
            return self.state.complete
        if token in self.banned or self.state.complete:
            return False
        text = self._text(token)
        return bool(text) and "\ufffd" not in text and self.state.feed(text) is not None

    def take(self, token: int) -> None:
        if token not in self.stop_ids:
            self.state = self.state.feed(self._text(token)) or self.state
