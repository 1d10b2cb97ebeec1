"""Records of many traces, interleaved in a file, read back one whole trace at a time.

Plain Python, no Django. `TraceGroups` files each record under its trace key in a temporary
SQLite database on disk (stdlib `sqlite3`, no journal, deleted on close): a `records` table
(trace key, file position, the record's number and, for a record of a JSON document, the
line where it starts (`annotate.input_records.Position`), the record in `marshal` form: the fastest to write and read
back of the codecs tried (JSON, pickle), exact for every JSON value, and read only by the
process that wrote it) with an index on (key, position), and
a `traces` table holding each key's first position. `traces()` then reads the keys in order
of first appearance and, for each, its records in file order. Memory holds the write buffer
and one trace; the file can be any size and its traces in any order.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from typing import Any

from annotate.input_records import position_of, stored_position

FLUSH_EVERY = 5000


class TraceGroups:
    def __init__(self) -> None:
        handle, self.path = tempfile.mkstemp(prefix="arbiter-traces-", suffix=".sqlite3")
        os.close(handle)
        self.db = sqlite3.connect(self.path)
        self.db.executescript(
            """
            PRAGMA journal_mode = OFF;
            PRAGMA synchronous = OFF;
            PRAGMA temp_store = FILE;
            CREATE TABLE records (key TEXT NOT NULL, position INTEGER NOT NULL, number INTEGER NOT NULL,
                                  line INTEGER, body BLOB NOT NULL);
            CREATE TABLE traces (key TEXT PRIMARY KEY, first INTEGER NOT NULL) WITHOUT ROWID;
            """
        )
        self._rows: list[tuple[str, int, int, int | None, bytes]] = []
        self._position = 0
        self.records = 0

    def add(self, key: str, line: int, record: Any) -> None:
        """File `record` under `key`; `line` is where it is (a line number, or a `Position`)."""
        self._rows.append((key, self._position, *stored_position(line), marshal.dumps(record)))
        self._position += 1
        self.records += 1
        if len(self._rows) >= FLUSH_EVERY:
            self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        self.db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", self._rows)
        self.db.executemany("INSERT OR IGNORE INTO traces VALUES (?, ?)", ((r[0], r[1]) for r in self._rows))
        self._rows.clear()

    def traces(self) -> Iterator[tuple[str, list[tuple[int, Any]]]]:
        """(key, [(line or Position, record), ...]) per trace, in order of first appearance."""
        self._flush()
        self.db.execute("CREATE INDEX records_key ON records (key, position)")
        keys = self.db.execute("SELECT key FROM traces ORDER BY first")
        reader = self.db.cursor()
        for (key,) in keys:
            rows = reader.execute("SELECT number, line, body FROM records WHERE key = ? ORDER BY position", (key,))
            yield key, [(position_of(number, line), marshal.loads(body)) for number, line, body in rows]

    def close(self) -> None:
        self.db.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> TraceGroups:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
