"""The `raw` export on PostgreSQL by COPY, parsed by pyarrow in blocks (annotate/exports.py
`export_rows` chooses it; the other databases and formats go through Python rows)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from django.db import connection

from annotate.export_schemas import RATINGS, SCHEMAS, rating_rows
from annotate.models import DatasetSnapshot
from webapp.models import User, pseudonym_salt

# The `raw` export on PostgreSQL: the rows come out of `COPY (SELECT ...) TO STDOUT` as CSV
# and pyarrow parses them in blocks, so a million judgements never pass through Python
# objects one by one. The SQL computes every column as the Python path does (pseudonyms
# included, once per user); tests check that both paths give the same rows. It reads the
# snapshot's rows and the judgements only: the task's id and the side shown left are
# frozen into the snapshot's rows when it is built.

_RAW_COPY_SQL = """
WITH n (id, pseudonym) AS MATERIALIZED (  -- once per user, not once per row
    SELECT id, 'annotator-' || left(encode(sha256(convert_to(%(salt)s || ':' || id::text, 'UTF8')), 'hex'), 12)
    FROM {users}
)
SELECT j.id AS judgement_id, j.comparison_id, sj.task_external_id, n.pseudonym,
       CASE WHEN sj.left_is_a IS NULL THEN NULL WHEN sj.left_is_a THEN 'A' ELSE 'B' END,
       j.choice, CASE WHEN j.choice < 3 THEN 'A' WHEN j.choice > 3 THEN 'B' ELSE 'tie' END,
       j.both_bad, j.ratings::text, j.first_wrong_step_a, j.first_wrong_step_b, j.rationale, j.seconds, j.synthetic,
       to_char(j.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), sj.split,
       CASE WHEN j.synthetic THEN 'simulated' ELSE 'people' END  -- export_labels.judgement_labelled_by
FROM annotate_snapshotjudgement sj
JOIN annotate_judgement j ON j.id = sj.judgement_id
JOIN n ON n.id = j.annotator_id
WHERE sj.snapshot_id = %(snapshot)s {split_rule}
ORDER BY sj.judgement_id
"""


class _CopyStream(io.RawIOBase):
    """A readable file over a psycopg COPY, for pyarrow's streaming CSV reader.

    PostgreSQL sends one message per row; each read fills the caller's whole buffer, so
    pyarrow sees full blocks rather than one row at a time.
    """

    def __init__(self, copy):
        self._copy, self._pending, self._done = copy, bytearray(), False

    def readable(self) -> bool:
        return True

    def at_end(self) -> bool:
        """True when the COPY sends no data at all (reads ahead one message)."""
        if not self._pending and not self._done:
            chunk = self._copy.read()
            if chunk:
                self._pending += chunk
            else:
                self._done = True
        return not self._pending and self._done

    def readinto(self, target) -> int:
        want = len(target)
        while len(self._pending) < want and not self._done:
            chunk = self._copy.read()
            if chunk:
                self._pending += chunk
            else:
                self._done = True
        n = min(want, len(self._pending))
        target[:n] = self._pending[:n]
        del self._pending[:n]
        return n


def _ratings_column(texts: pa.Array) -> pa.Array:
    """The typed `ratings` column from its JSON text, as `rating_rows` makes each row's list.

    Parsed by pyarrow's JSON reader and reshaped with array operations, not a Python object
    per judgement (a million rated judgements took 8 s the other way). A batch the reader
    cannot type (a dimension that is not an object, a rating that is not a whole number, a
    null) is parsed row by row as before, so every row comes out as `rating_rows` says."""
    if not pc.any(pc.invert(pc.equal(texts, "{}"))).as_py():
        return pa.ListArray.from_arrays(pa.array(np.zeros(len(texts) + 1, np.int32)), pa.array([], RATINGS.value_type))
    try:
        return _ratings_reshaped(texts)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return pa.array([rating_rows(json.loads(text)) for text in texts.to_pylist()], type=RATINGS)


def _ratings_reshaped(texts: pa.Array) -> pa.Array:
    if pc.any(pc.match_substring(texts, "null")).as_py():
        raise ValueError("a null somewhere: row by row")
    data = "\n".join(texts.to_pylist()).encode()
    table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=len(data) + 1))
    if table.num_rows != len(texts):
        raise ValueError("the reader did not give one row per judgement")
    rows, order, dimensions, sides, values = [], [], [], [], []
    dims = sorted(table.column_names)
    for d, dim in enumerate(dims):
        column = table.column(dim).combine_chunks()
        if not pa.types.is_struct(column.type):
            raise TypeError(f"dimension {dim!r} is not an object")
        names = sorted(column.type.field(i).name for i in range(column.type.num_fields))
        for s, side in enumerate(names):
            value = column.field(side)
            if not pa.types.is_integer(value.type):
                raise TypeError(f"rating {dim}.{side} is not a whole number")
            present = np.flatnonzero(value.is_valid().to_numpy(zero_copy_only=False))
            rows.append(present)
            order.append(np.full(len(present), d * len(names) + s))
            dimensions.append(pa.array([dim] * len(present), pa.string()))
            sides.append(pa.array([side] * len(present), pa.string()))
            values.append(value.take(pa.array(present)).cast(pa.int64()))
    rows, order = np.concatenate(rows), np.concatenate(order)
    by_row = np.lexsort((order, rows))
    take = pa.array(by_row)
    entries = pa.StructArray.from_arrays(
        [
            pa.concat_arrays(dimensions).take(take),
            pa.concat_arrays(sides).take(take),
            pa.concat_arrays(values).take(take),
        ],
        names=["dimension", "side", "value"],
    )
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(texts)))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), entries)


def _parsed_batches(stream):
    """Arrow record batches of the raw schema from a readable file of COPY's CSV rows."""
    schema = SCHEMAS["raw"]
    # CSV carries ratings as JSON text; each batch turns them into the typed column. Blocks
    # of 1 MB (about 6,000 rows): with 4 MB the peak RSS at a million rows was 370-420 MB,
    # with 1 MB 254 MB, at the same speed (benchmarks/RESULTS.md, issue 31).
    csv_schema = pa.schema([pa.field("ratings", pa.string()) if f.name == "ratings" else f for f in schema])
    at = schema.get_field_index("ratings")
    reader = pa_csv.open_csv(
        stream,
        read_options=pa_csv.ReadOptions(column_names=schema.names, block_size=1 << 20),
        convert_options=pa_csv.ConvertOptions(
            column_types=csv_schema,
            true_values=["t"],
            false_values=["f"],
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    for batch in reader:
        columns = batch.columns
        columns[at] = _ratings_column(columns[at])
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


# One row as COPY writes it, for `export_libraries_load`.
_SAMPLE_CSV = (
    b'1,1,task-1,annotator-0,A,1,A,f,"{""correctness"": {""A"": 4}}",,0,why,12.5,f,'
    b"2026-01-01T00:00:00.000000Z,train,people\n"
)


def export_libraries_load() -> None:
    """Export one row in memory, so that what a process's first export loads is loaded now:
    pandas, which pyarrow imports the first time it converts any Python or numpy object (0.3 s
    idle, over 1 s on a loaded 2-core VM: 13.6x a plain COPY at 10k judgements, issue 56), and
    the first use of pyarrow's CSV and JSON readers, its thread pool and the zstd Parquet
    writer (0.1 s more). A worker calls it once when it starts (annotate/tasks.py), so no
    export pays it. The raw path converts numpy arrays for its ratings column; rewriting it
    around that import would make it harder to read for a cost a worker pays once."""
    with pq.ParquetWriter(pa.BufferOutputStream(), SCHEMAS["raw"], compression="zstd") as writer:
        for batch in _parsed_batches(io.BytesIO(_SAMPLE_CSV)):
            writer.write_batch(batch)


class RawCopyBatches:
    """The `raw` rows of a snapshot as Arrow record batches straight from COPY (PostgreSQL)."""

    def __init__(self, snapshot: DatasetSnapshot, split: str | None):
        self.snapshot, self.split = snapshot, split

    def copy_sql(self) -> str:
        """The COPY statement, with its values inlined (COPY takes no parameters)."""
        from psycopg import ClientCursor

        params = {"salt": pseudonym_salt(), "snapshot": self.snapshot.pk, "split": self.split}
        sql = _RAW_COPY_SQL.format(
            split_rule="AND sj.split = %(split)s" if self.split else "", users=User._meta.db_table
        )
        connection.ensure_connection()
        return f"COPY ({ClientCursor(connection.connection).mogrify(sql, params)}) TO STDOUT (FORMAT csv)"

    def _batches(self):
        statement = self.copy_sql()
        with connection.connection.cursor() as cursor, cursor.copy(statement) as copy:
            stream = _CopyStream(copy)
            if stream.at_end():
                return  # no rows (an empty split): pyarrow refuses an empty CSV
            yield from _parsed_batches(stream)

    def write(self, path: Path, filetype: str) -> int:
        count = 0
        if filetype == "parquet":
            with pq.ParquetWriter(path, SCHEMAS["raw"], compression="zstd") as writer:
                for batch in self._batches():
                    writer.write_batch(batch)
                    count += batch.num_rows
                if count == 0:
                    writer.write_table(SCHEMAS["raw"].empty_table())
            return count
        with path.open("w", encoding="utf-8") as out:
            for batch in self._batches():
                for row in batch.to_pylist():
                    out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
                count += batch.num_rows
        return count
