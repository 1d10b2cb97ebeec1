"""Database helpers shared by the apps."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from django.db import IntegrityError, transaction

ATTEMPTS = 5


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
