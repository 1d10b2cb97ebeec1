"""Strict JSON for untrusted input: what parses here can be stored, or the reason why not.

Python's `json` module accepts input that the database then refuses or that crashes later:
`NaN`, `Infinity` and numbers like `1e400` (no JSON column holds them), lone UTF-16
surrogates such as `"\\ud800"` (not encodable as UTF-8), NUL characters (PostgreSQL text
cannot hold them), integers of thousands of digits (Python refuses to convert them) and
nesting deep enough to exhaust the recursion limit when the value is written. `loads`
refuses each with a message that names the place, so the API, the upload page and the
import command can all answer "line 3: ..." instead of failing with a 500.

Plain Python, no Django.
"""

from __future__ import annotations

import json
import math
import re
from itertools import compress
from typing import Any

MAX_DEPTH = 64  # far deeper than any trajectory, config or filter needs
# Text with this many brackets or more has its depth counted before it is decoded: well below the
# ~1,000 levels at which the decoder's recursion fails, so nothing deeper ever reaches it.
DECODER_SAFE_DEPTH = 500
_SURROGATE = re.compile("[\ud800-\udfff]")
# In JSON text, a decoded string can hold a NUL or a UTF-16 surrogate only through an escape
# (strict decoding refuses raw control characters; UTF-8 cannot carry surrogates), or, in a
# `str` handed in by Python code, as the character itself.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class JsonInputError(ValueError):
    """The text is not JSON that Arbiter can store; the message says why and where. `syntax`:
    it is not JSON at all (rather than JSON holding what cannot be stored)."""

    def __init__(self, message: str, *, syntax: bool = False):
        super().__init__(message)
        self.syntax = syntax


def _refuse_constant(name: str):
    raise JsonInputError(f"{name} is not a number JSON allows; send a finite number or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonInputError(f"the number {text[:40]} is too large to store")
    return value


def _decode_error(exc: json.JSONDecodeError) -> str:
    # The decoder's messages for control characters end in a bare "at": drop it.
    reason = exc.msg.removesuffix(" at").rstrip(":")
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {reason[:1].lower()}{reason[1:]}"


# One decoder for every call: `json.loads` with hooks builds a new one each time, a cost
# that shows when a trace's attributes hold thousands of small JSON strings.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode `text` and check the value (see `check`); raises `JsonInputError`."""
    from_bytes = isinstance(text, (bytes, bytearray))
    if from_bytes:
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonInputError(f"bytes that are not UTF-8 at offset {exc.start}") from None
    if _may_be_deep(text, DECODER_SAFE_DEPTH) and _bracket_depth(text) > max_depth:
        # Refused before decoding: the decoder recurses once per level, and a deep enough value
        # exhausts its stack wherever it is decoded. Text with fewer brackets than this cannot nest
        # that deep, and is checked after decoding, more cheaply, by its containers.
        raise JsonInputError(f"JSON nested more than {max_depth} levels deep")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonInputError(_decode_error(exc), syntax=True) from None
    except RecursionError:
        raise JsonInputError(f"JSON nested more than {max_depth} levels deep") from None
    except JsonInputError:
        raise
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit conversion limit
        raise JsonInputError(f"invalid JSON: {str(exc).split(';')[0]}") from None
    # Numbers were checked while decoding (`_finite_float`, `_refuse_constant`). With no suspect
    # escape in the text no string can be bad, so only the depth is left to check, a walk over
    # containers alone; a refusal is explained by the full `check`, which names the place.
    suspect = ("\\u" in text and _SUSPECT_ESCAPE.search(text) is not None) or (
        not from_bytes and _SURROGATE.search(text) is not None
    )
    if suspect or (_may_be_deep(text, max_depth) and not _shallow(value, max_depth)):
        check(value, max_depth=max_depth)
    return value


def type_name(value: Any) -> str:
    """A JSON value's type in words, for refusals ("expected an object, got a string")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def shown(text: str) -> str:
    """Text from a request, safe to put in a message: lone surrogates and NUL written as their
    escapes (as raw characters they cannot be encoded as UTF-8, and the reply itself would fail)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).replace("\x00", "\\u0000")


def _where(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{shown(part[:60])}" if out else shown(part[:60]))
    return out or "the top level"


def _check_text(text: str, path: tuple) -> None:
    if "\x00" in text:
        raise JsonInputError(f"{_where(path)}: contains a NUL character (\\u0000), which cannot be stored")
    if _SURROGATE.search(text):
        raise JsonInputError(
            f"{_where(path)}: contains a lone UTF-16 surrogate (such as \\ud800), which is not valid Unicode text"
        )


def _may_be_deep(text: str, max_depth: int) -> bool:
    """False when the text has fewer than `max_depth` opening brackets: every container opens
    with one (brackets inside strings only add to the count), so none can lie that deep. A
    count in C, far cheaper than the walk of `_shallow` for the small JSON strings that trace
    attributes hold."""
    return text.count("{") + text.count("[") >= max_depth


_IS_CONTAINER = frozenset((dict, list)).__contains__


def _shallow(value: Any, max_depth: int) -> bool:
    """Whether no container lies `max_depth` or more levels deep: level by level, containers
    only, their children filtered in C (`compress` over their types; json gives exact types)."""
    level = [value] if _IS_CONTAINER(type(value)) else []
    depth = 0
    while level:
        if depth >= max_depth:
            return False
        deeper: list = []
        for item in level:
            children = item.values() if type(item) is dict else item
            deeper.extend(compress(children, map(_IS_CONTAINER, map(type, children))))
        level = deeper
        depth += 1
    return True


# Only what nesting is made of: brackets and the quotes that delimit strings (escaped quotes and
# backslashes are taken out first, so every quote left opens or closes a string).
_NOT_STRUCTURE = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in '[]{}"'))
_PLAIN_STRING = re.compile(r'"[^"]*"')
_OPENING, _CLOSING = (ord("["), ord("{")), (ord("]"), ord("}"))


def _bracket_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, strings left out, without decoding it: the
    running sum of +1 per opening and -1 per closing bracket, in C (numpy), so linear in the
    text whatever its shape. (For text that is not JSON the figure is an estimate; the decoder
    then refuses it.)"""
    import numpy as np

    structure = _PLAIN_STRING.sub("", text.replace("\\\\", "").replace('\\"', "").translate(_NOT_STRUCTURE))
    codes = np.frombuffer(structure.encode("ascii", "ignore"), dtype=np.uint8)
    if not codes.size:
        return 0
    steps = np.isin(codes, _OPENING).astype(np.int64) - np.isin(codes, _CLOSING)
    return max(0, int(np.cumsum(steps).max()))


def check(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a decoded value that cannot be stored: too deep, non-finite numbers, bad text.

    Iterative, so a value of any depth is checked without recursion.
    """
    stack: list[tuple[Any, tuple, int]] = [(value, (), 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonInputError(f"{_where(path)}: {item} is not a finite number")
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                raise JsonInputError(f"{_where(path)}: JSON nested more than {max_depth} levels deep")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise JsonInputError(f"{_where(path)}: object keys must be text")
                    _check_text(key, path + (key,))
                    stack.append((child, path + (key,), depth + 1))
            else:
                stack.extend((child, path + (i,), depth + 1) for i, child in enumerate(item))
