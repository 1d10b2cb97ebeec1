"""The records of an import file, whichever way its tool wrote it: JSONL (a record per line), or
one JSON document, streamed.

Tools write both: an OTLP `ExportTraceServiceRequest` is one JSON object (collectors' file
exporters pretty-print it; so does anyone who saves a request body), a Langfuse export of
traces is a JSON array, a LangSmith or OpenAI-chat export may be either. A file is one
document when its first line opens an object or an array and ends before the value does
(a JSONL line that is broken fails inside the line instead). Its records are then:
- an array: each item;
- an object with `resourceSpans` (OTLP): each resource span, as a request of its own (the
  converters read a request per record, so a trace split across two resource spans is still
  filed together by its trace id);
- an object with a `data` list (an API page, as Langfuse's list endpoints answer): each item;
- any other object: itself.

The document is read with ijson (yajl, the C backend) so memory holds one record, not the
file. Each record is handed on as JSON text, so it passes the same strict decoder as a JSONL
line (`core.json_input`: no NaN, no lone surrogate, no NUL, bounded depth). Record numbers
count from 1 in the document, as line numbers do in JSONL.

Where a record is: a JSONL line's number is a plain int; a document's record is a `Position`,
its number with the line of the file where it starts (a pretty-printed Langfuse export's
record 2 starts on line 1014, say). Every message that names a place goes through `at()`
("line 7", "record 2, line 1014") and every stored error through `position_fields()`, so the
readers cannot disagree. ijson gives no positions, so `_Starts` finds each record's first
line in the same bytes as they go to ijson (strings skipped, brackets counted, newlines
counted by `bytes.count`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Iterable, Iterator

import ijson

SPLIT_KEYS = ("resourceSpans", "data")  # an object's list whose items are the records


class Position(int):
    """A record of a JSON document: the int is its number (from 1), `line` the line of the file
    where it starts (None where that is not known: the items of a request body)."""

    line: int | None

    def __new__(cls, number: int, line: int | None) -> Position:
        position = super().__new__(cls, number)
        position.line = line
        return position

    def __reduce__(self):
        return (Position, (int(self), self.line))


def at(position: int) -> str:
    """Where a record is, in words: "line 7" (a JSONL line, a plain int), "record 2, line 1014"
    (a record of a JSON document) or "record 2" (its line not known)."""
    if not isinstance(position, Position):
        return f"line {position}"
    return f"record {int(position)}" + (f", line {position.line}" if position.line is not None else "")


def position_fields(position: int) -> dict:
    """Where a record is, as an import's stored error holds it: `line` (the file's line, when
    known) and, for a record of a document, `record` (its number)."""
    if not isinstance(position, Position):
        return {"line": int(position)}
    return {"record": int(position), **({"line": position.line} if position.line is not None else {})}


def error_place(detail: dict) -> str:
    """Where a stored import error is, in words (as `at` says it); errors stored before records
    had lines say `{"unit": "record", "line": N}` for record N."""
    if "record" in detail:
        return f"record {detail['record']}" + (f", line {detail['line']}" if "line" in detail else "")
    return f"{detail.get('unit', 'line')} {detail.get('line')}"


def stored_position(position: int) -> tuple[int, int | None]:
    """(number, line) to store a position, read back by `position_of`: line is None for a JSONL
    line, 0 for a record whose line is not known."""
    if not isinstance(position, Position):
        return int(position), None
    return int(position), position.line or 0


def position_of(number: int, line: int | None) -> int:
    """A position stored by `stored_position` back as the int or the Position it was."""
    return number if line is None else Position(number, line or None)


class TooLong:
    """A JSONL line over the limit, in place of its bytes (never held in memory)."""

    def __init__(self, size: int, limit: int):
        self.size, self.limit = size, limit

    def reason(self) -> str:
        return (
            f"the line is over {self.limit:,} bytes (IMPORT_MAX_LINE_BYTES; it has at least "
            f"{self.size:,}): split the record or raise the limit"
        )


def _bounded_lines(stream, limit: int) -> Iterator:
    """The stream's lines, each read only up to `limit` bytes: a longer one is skipped to its end
    in chunks and stands as a TooLong."""
    readline = getattr(stream, "readline", None)
    if readline is None:
        for line in stream:
            yield line if len(line) <= limit else TooLong(len(line), limit)
        return
    while True:
        line = readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or (len(line) == limit + 1 and line.endswith(b"\n")):
            yield line
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            line = readline(1 << 20)
            if not line:
                break
            size += len(line)
        yield TooLong(size, limit)


class DocumentError(ValueError):
    """The JSON document is not valid; reading stops there (nothing of it is imported)."""


# The exact scan, for any cut of the bytes: 1 a whole string, 2 a quote whose string runs past
# this chunk, 3 an opening bracket, 4 a closing one, 5 a comma.
_SCAN = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|(")|([\[{])|([\]}])|(,)')
_STRING_STOP = re.compile(rb'["\\]')
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
# The fast scan of whole lines (a raw newline is never inside a JSON string): every run of
# strings and scalars becomes one "x", leaving brackets, commas and newlines to count.
_FILLER = re.compile(rb'(?:"[^"\\]*(?:\\.[^"\\]*)*"|[^"\[\]{},\n])+')
_LONG_LINE = 1 << 20  # a line held back longer than this (a minified document) takes the exact scan


class _Starts:
    """The line where each record of a JSON document starts, from the bytes ijson reads.

    It follows the document's brackets (skipping strings): the first value's line is the
    document's own (a lone object is one record); the first byte of each item of a top-level
    array, or of an array that is a value of a top-level object (the `data` or `resourceSpans`
    list: its first key, so later arrays only add lines that are never asked for), is a
    record's start. Invalid JSON is ijson's to refuse; this only counts.

    Whole lines go through `_fast` (strings and scalars squeezed out by the C regex engine,
    then a loop over what is left); a line still open at the end of a chunk waits for the next
    one, unless it is long or a record's line is asked for, when `_scan` (exact at any cut)
    reads it. benchmarks/record_lines.py measures what it adds to reading a document.
    """

    def __init__(self) -> None:
        self.starts: deque[int] = deque()
        self.document_line: int | None = None
        self._record_depth = 0  # 1: items of a top-level array; 2: items of an object's list
        self._lines = 0  # newlines in the bytes already scanned
        self._depth = 0
        self._in_string = self._escaped = False
        self._pending = True  # the next non-space byte starts a value to note
        self._held = b""  # the end of the last chunk: a line not finished yet

    def feed(self, chunk: bytes) -> None:
        data, self._held = self._held + chunk, b""
        if self._in_string or self._escaped:  # the exact scan stopped inside a string
            self._scan(data)
            return
        cut = data.rfind(b"\n") + 1
        if cut:
            self._fast(data[:cut])
        self._held = data[cut:]
        if len(self._held) > _LONG_LINE:
            self.flush()

    def flush(self) -> None:
        """Scan what is held back (a line not finished yet)."""
        held, self._held = self._held, b""
        if held:
            self._scan(held)

    def next_line(self) -> int | None:
        if not self.starts:
            self.flush()
        return self.starts.popleft() if self.starts else None

    def _fast(self, lines: bytes) -> None:
        line, depth, at, pending = self._lines + 1, self._depth, self._record_depth, self._pending
        for char in _FILLER.sub(b"x", lines.translate(None, b" \t\r")):
            if char == 10:  # "\n"
                line += 1
                continue
            if pending:
                pending = False
                if char != 93 and char != 125:  # not "]" or "}": a value starts
                    if depth == 0:
                        at, self.document_line = (1 if char == 91 else 2), line
                    else:
                        self.starts.append(line)
            if char == 91 or char == 123:  # "[" or "{"
                depth += 1
                pending = depth == at and char == 91
            elif char == 93 or char == 125:
                depth -= 1
            elif char == 44 and depth == at:  # a comma between records
                pending = True
        self._lines, self._depth, self._record_depth, self._pending = line - 1, depth, at, pending

    def _scan(self, chunk: bytes) -> None:
        pos, end, counted, newlines = 0, len(chunk), 0, 0
        while pos < end:
            if self._in_string:  # a string that began in an earlier chunk
                if self._escaped:
                    pos, self._escaped = pos + 1, False
                    continue
                stop = _STRING_STOP.search(chunk, pos)
                if stop is None:
                    break
                if stop.group() == b"\\":
                    pos, self._escaped = stop.end(), True
                else:
                    pos, self._in_string = stop.end(), False
                continue
            if self._pending:
                found = _NOT_SPACE.search(chunk, pos)
                if found is None:
                    break
                self._pending, pos = False, found.start()
                if found.group() in (b"]", b"}"):  # an empty list: no record
                    continue
                newlines += chunk.count(b"\n", counted, pos)
                counted = pos
                line = self._lines + newlines + 1
                if self._depth == 0:
                    self._record_depth, self.document_line = (1 if found.group() == b"[" else 2), line
                else:
                    self.starts.append(line)
                continue
            for token in _SCAN.finditer(chunk, pos):
                kind = token.lastindex
                if kind == 1:
                    continue
                if kind == 2:
                    self._in_string, pos = True, token.end()
                    break
                if kind == 3:
                    self._depth += 1
                    if self._depth == self._record_depth and chunk[token.start()] == 0x5B:  # "[": a list of records
                        self._pending, pos = True, token.end()
                        break
                elif kind == 4:
                    self._depth -= 1
                elif self._depth == self._record_depth:  # a comma between records
                    self._pending, pos = True, token.end()
                    break
            else:
                pos = end
        self._lines += newlines + chunk.count(b"\n", counted)


class _Replay:
    """A readable file over lines already read and the rest of the stream, for ijson; what it
    hands over is scanned for where records start (`starts`)."""

    def __init__(self, first: list[bytes], rest: Iterator[bytes]):
        self._chunks = itertools.chain(first, rest)
        self._pending = b""
        self.starts = _Starts()

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self.starts.feed(chunk)
            self._pending += chunk
        if size < 0:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:size], self._pending[size:]
        return out


def _is_document(first) -> bool:
    """True when the first line opens an object or an array that it does not close: JSON goes on
    past the line's end (a broken JSONL line fails inside the line instead)."""
    if isinstance(first, TooLong):
        return False
    text = first.decode("utf-8", "replace").strip()
    if text[:1] not in ("{", "["):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text)
    except (ValueError, RecursionError):  # a line nested past the decoder's stack: JSONL, refused when read
        return False
    return False


def records(stream: Iterable[bytes], *, max_line: int = 64 << 20) -> tuple[str, Iterator[tuple[int, bytes]]]:
    """("jsonl" | "document", the numbered records as JSON text; a JSONL line over `max_line`
    bytes comes as a TooLong). A JSONL record's number is its line's; a document's is a
    `Position` (its number and the line where it starts)."""
    lines = _bounded_lines(stream, max_line)
    peeked: list[bytes] = []
    for line in lines:
        peeked.append(line)
        if isinstance(line, TooLong) or line.strip():
            break
    if not peeked or not _is_document(peeked[-1]):
        return "jsonl", enumerate(itertools.chain(peeked, lines), start=1)
    # A document's lines may be of any length: the rest is read in blocks, not lines.
    read = getattr(stream, "read", None)
    rest = iter(lambda: read(1 << 20), b"") if read is not None else lines
    return "document", _document_records(_Replay(peeked, rest))


def _document_records(source: _Replay) -> Iterator[tuple[Position, bytes]]:
    events = ijson.parse(source, use_float=True)
    starts = source.starts
    try:
        first = next(events, None)
        if first is None:
            return
        if first[1] == "start_array":
            for number, item in enumerate(ijson.items(itertools.chain([first], events), "item"), start=1):
                yield Position(number, starts.next_line()), _dumps(item)
            return
        second = next(events)
        if second[1] == "map_key" and second[2] in SPLIT_KEYS:
            key = second[2]  # its list's items are the records; another key beside it is left aside
            for number, item in enumerate(ijson.items(itertools.chain([first, second], events), f"{key}.item"), 1):
                yield (
                    Position(number, starts.next_line()),
                    _dumps({"resourceSpans": [item]} if key == "resourceSpans" else item),
                )
            return
        for number, item in enumerate(ijson.items(itertools.chain([first, second], events), ""), start=1):
            yield Position(number, starts.document_line), _dumps(item)
    except (ijson.JSONError, ijson.IncompleteJSONError) as exc:
        raise DocumentError(f"the JSON document is not valid: {str(exc).splitlines()[0][:200]}") from None


def _dumps(value) -> bytes:
    # Lone surrogates stay \\ud800 escapes and non-finite floats stay NaN/Infinity, so the strict
    # decoder downstream refuses them with the record's number.
    return json.dumps(value, ensure_ascii=True).encode()
