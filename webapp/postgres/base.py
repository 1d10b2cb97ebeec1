"""Django's PostgreSQL backend, with a health check that costs no round trip while the server
has sent nothing since its last answer.

Django checks a persistent connection at each request's first query (CONN_HEALTH_CHECKS) by
sending `SELECT 1`: a round trip per request, two of the seven statements of a labeling
cycle. A server that ends a connection (a restart, `pg_terminate_backend`, an idle timeout)
first sends its reason and closes the socket, so an idle connection whose socket has nothing
to read has not been ended; one that has something (that goodbye, or a notice) is asked with
`SELECT 1` as before, and replaced if it does not answer. `DB_CONN_HEALTH_CHECKS=false` still
turns the check off.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed:
            return False
        try:
            readable, _, _ = select.select([connection.fileno()], [], [], 0)
        except (OSError, ValueError):  # the socket is gone
            return False
        return True if not readable else super().is_usable()
