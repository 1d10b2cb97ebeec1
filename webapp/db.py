"""Database helpers shared by the apps."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

ATTEMPTS = 5


def instance_from_values(model, values: dict):
    """A model instance from column values read without the ORM ({attname: value}): these
    fields set, the others deferred (read from the database if touched)."""
    names = [name for name in _attnames(model) if name in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])


def instance_values(instance) -> dict:
    """Every column value of `instance`, by attname: what `instance_from_values` rebuilds it from."""
    return {name: getattr(instance, name) for name in _attnames(type(instance))}


@functools.cache
def _attnames(model) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


def bulk_create_new(
    model,
    objects: list,
    *,
    key: Callable[[object], Hashable],
    stored_keys: Callable[[list[Hashable]], Iterable[Hashable]],
    batch_size: int = 1000,
) -> list:
    """Insert the `objects` whose key is not stored yet; returns the ones inserted.

    Safe when another transaction inserts the same keys at the same moment (two clients
    importing one file): the insert runs in a savepoint, and on a unique violation the
    stored keys are read again (the other transaction has committed by then, so under
    READ COMMITTED they are visible) and the rest is inserted. The caller counts the
    others as already stored, exactly.
    """
    pending = list(objects)
    for attempt in range(ATTEMPTS):
        stored = set(stored_keys([key(o) for o in pending])) if pending else set()
        pending = [o for o in pending if key(o) not in stored]
        if not pending:
            return []
        try:
            with transaction.atomic():
                model.objects.bulk_create(pending, batch_size=batch_size)
            return pending
        except IntegrityError:
            if attempt == ATTEMPTS - 1:
                raise
    return []


def insert_new_rows(
    model,
    fields: Sequence[str],
    rows: Iterable[tuple],
    *,
    constants: dict,
    conflict: Sequence[str],
    returning: str | None = None,
) -> int | list:
    """PostgreSQL, inside a transaction: insert `rows` (values of `fields`, by attname) into
    `model`'s table, every other column taking its value from `constants`, else the model
    field's own default (now for auto_now fields), so a column the model gains later is filled
    as the ORM would fill it. A row whose `conflict` key is stored already is skipped (ON
    CONFLICT DO NOTHING: safe beside another transaction inserting the same keys). The rows
    travel by COPY into a temporary table, then one INSERT ... SELECT: no model object per
    row. Returns how many were inserted, or with `returning` (an attname) that column of each
    row inserted."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("insert_new_rows runs inside a transaction (its temporary table ends with it)")
    quote = connection.ops.quote_name
    now, others, values = timezone.now(), [], []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.attname in fields:
            continue
        if field.attname in constants:
            value = constants[field.attname]
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            value = now
        elif field.has_default():
            value = field.get_default()
        elif field.null:
            value = None
        else:
            raise ValueError(f"{model.__name__}.{field.attname} has no default: give its value in `constants`")
        others.append(quote(field.column))
        values.append(field.get_db_prep_save(value, connection))
    table, scratch = quote(model._meta.db_table), quote(f"new_rows_{uuid.uuid4().hex[:12]}")
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in fields)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {scratch} ON COMMIT DROP AS SELECT {columns} FROM {table} WITH NO DATA")
        with cursor.copy(f"COPY {scratch} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        placeholders = ", ".join(["%s"] * len(values))
        key = ", ".join(quote(model._meta.get_field(name).column) for name in conflict)
        returned = f" RETURNING {quote(model._meta.get_field(returning).column)}" if returning else ""
        cursor.execute(
            f"INSERT INTO {table} ({columns}, {', '.join(others)}) SELECT {columns}, {placeholders} FROM {scratch} "
            f"ON CONFLICT ({key}) DO NOTHING{returned}",
            values,
        )
        inserted = [value for (value,) in cursor.fetchall()] if returning else cursor.rowcount
        cursor.execute(f"DROP TABLE {scratch}")
    return inserted
