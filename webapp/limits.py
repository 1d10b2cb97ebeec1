"""Per-person limits that hold under concurrency.

A limit checked by counting rows and then writing one ("at most 5 corrections of one side",
"at most 50 tokens") lets a burst through: each of 16 requests at once counts 4 and writes
(issue 53: 8 stored against a limit of 5). Taking a lock on the person's own row first, in
the transaction that counts and writes, makes their requests take turns; other people are
not held up. On SQLite (the embedded mode) every write transaction starts IMMEDIATE and so
runs one at a time already; the lock is a no-op there.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction


def person_lock(user) -> None:
    """Hold `user`'s row until the current transaction ends, so that one person's counted
    limits are counted and written by one request at a time."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("person_lock is taken inside the transaction that counts and writes.")
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
