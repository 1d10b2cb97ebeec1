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
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator

import ijson

SPLIT_KEYS = ("resourceSpans", "data")  # an object's list whose items are the records


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


class _Replay:
    """A readable file over lines already read and the rest of the stream, for ijson."""

    def __init__(self, first: list[bytes], rest: Iterator[bytes]):
        self._chunks = itertools.chain(first, rest)
        self._pending = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
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
    bytes comes as a TooLong)."""
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
    return "document", enumerate(_document_records(_Replay(peeked, rest)), start=1)


def _document_records(source: _Replay) -> Iterator[bytes]:
    events = ijson.parse(source, use_float=True)
    try:
        first = next(events, None)
        if first is None:
            return
        if first[1] == "start_array":
            yield from map(_dumps, ijson.items(itertools.chain([first], events), "item"))
            return
        second = next(events)
        if second[1] == "map_key" and second[2] in SPLIT_KEYS:
            key = second[2]  # its list's items are the records; another key beside it is left aside
            for item in ijson.items(itertools.chain([first, second], events), f"{key}.item"):
                yield _dumps({"resourceSpans": [item]} if key == "resourceSpans" else item)
            return
        yield from map(_dumps, ijson.items(itertools.chain([first, second], events), ""))
    except (ijson.JSONError, ijson.IncompleteJSONError) as exc:
        raise DocumentError(f"the JSON document is not valid: {str(exc).splitlines()[0][:200]}") from None


def _dumps(value) -> bytes:
    # Lone surrogates stay \\ud800 escapes and non-finite floats stay NaN/Infinity, so the strict
    # decoder downstream refuses them with the record's number.
    return json.dumps(value, ensure_ascii=True).encode()
