"""The PostgreSQL health check (webapp/postgres/base.py): no round trip for an idle connection
the server has said nothing on; a connection the server ended is found and replaced at the next
request, as Django's `SELECT 1` check did."""

import time

import pytest
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoPostgres

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def own():
    """A connection of its own, checked as a persistent connection is at each request."""
    conn = connections.create_connection("default")
    conn.settings_dict = {**conn.settings_dict, "CONN_HEALTH_CHECKS": True, "CONN_MAX_AGE": 60}
    conn.health_check_enabled = True
    yield conn
    conn.close()


def _pid(conn) -> int:
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_an_idle_connection_is_usable_without_a_round_trip(own, monkeypatch):
    assert own.vendor == "postgresql" and type(own).__module__ == "webapp.postgres.base"
    _pid(own)
    monkeypatch.setattr(DjangoPostgres, "is_usable", lambda self: pytest.fail("SELECT 1 was sent"))
    assert own.is_usable()


def test_a_connection_the_server_ended_is_replaced_at_the_next_request(own):
    first = _pid(own)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
    deadline = time.monotonic() + 5
    while own.is_usable() and time.monotonic() < deadline:  # the server's goodbye is on its way
        time.sleep(0.05)
    assert not own.is_usable()
    own.health_check_done = False  # a new request (close_old_connections)
    own.close_if_health_check_failed()
    assert _pid(own) != first  # a new connection, and the query answered
