"""API tokens are looked up once per request and kept for TOKEN_CACHE_SECONDS: a change made in
this process counts at once, one made by another process within the stated bound."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.factories import CampaignFactory, UserFactory
from webapp import authentication
from webapp.models import ApiToken
from webapp.tokens import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db

BOUND = 0.3  # seconds: a short cache so the tests wait little


@pytest.fixture(autouse=True)
def _short_cache(settings):
    settings.TOKEN_CACHE_SECONDS = BOUND
    authentication.token_cache_clear()
    yield
    authentication.token_cache_clear()


def _client(user) -> tuple[APIClient, ApiToken]:
    token, key = api_token_create(user=user, name="cache test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, token


def _token_queries(queries) -> int:
    return sum('FROM "webapp_apitoken"' in q["sql"] for q in queries)


def _from_another_process(sql: str, *params) -> None:
    """A change made without this process's signals, as another worker or psql would make it."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_a_token_is_looked_up_once_per_cache_period_and_per_request(settings):
    client, _ = _client(UserFactory(roles=["annotator"]))
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/whoami").status_code == 200
        assert client.get("/api/v1/whoami").status_code == 200
    assert _token_queries(queries.captured_queries) == 1  # the second request hit the cache

    # A labeling call the short path authenticates, then hands to DRF (a campaign that does
    # not exist), is authenticated once, not once by each path, with the cache off too.
    settings.TOKEN_CACHE_SECONDS = 0
    authentication.token_cache_clear()
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/assignments/next?campaign=987654321")
    assert response.status_code == 400  # no such campaign
    assert _token_queries(queries.captured_queries) == 1


def test_revoking_in_this_process_counts_at_once():
    user = UserFactory(roles=["annotator"])
    client, token = _client(user)
    assert client.get("/api/v1/whoami").status_code == 200
    assert api_token_revoke(user=user, token_id=token.id)
    assert client.get("/api/v1/whoami").status_code == 401


@pytest.mark.parametrize(
    "change",
    [
        ("DELETE FROM webapp_apitoken WHERE id = %s", "token"),
        ("UPDATE webapp_user SET is_active = false WHERE id = %s", "user"),
        ("DELETE FROM webapp_user_groups WHERE user_id = %s", "user"),
    ],
    ids=["token revoked", "user deactivated", "roles taken away"],
)
def test_a_change_made_by_another_process_counts_within_the_bound(change):
    sql, target = change
    user = UserFactory(roles=["annotator"])
    client, token = _client(user)
    campaign = CampaignFactory()
    next_url = f"/api/v1/assignments/next?campaign={campaign.id}"
    assert client.get(next_url).status_code in (200, 204)
    _from_another_process(sql, token.id if target == "token" else user.id)
    changed_at = time.monotonic()
    while client.get(next_url).status_code in (200, 204):
        assert time.monotonic() - changed_at <= BOUND + 0.25, "the change did not count within the bound"
        time.sleep(0.05)
    assert client.get(next_url).status_code in (401, 403)


def test_each_request_gets_its_own_user_and_token_objects():
    user = UserFactory(roles=["annotator"])
    _, key = api_token_create(user=user, name="copies")
    first_user, first_token = authentication.token_authenticate(key)
    first_user.first_name = "changed by a request"
    first_user._role_names.add("admin")
    second_user, second_token = authentication.token_authenticate(key)
    assert second_user is not first_user and second_token is not first_token
    assert second_user.first_name != "changed by a request"
    assert second_user._role_names == {"annotator"}
    assert second_token.user is second_user and second_user.pk == user.pk


def test_wrong_keys_are_not_cached_and_the_cache_is_bounded(monkeypatch):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get("/api/v1/whoami").status_code == 401
    assert not authentication._cache
    monkeypatch.setattr(authentication, "_MAX_ENTRIES", 3)
    user = UserFactory(roles=["annotator"])
    for i in range(7):
        _, key = api_token_create(user=user, name=f"bounded {i}")
        authentication.token_authenticate(key)
        assert len(authentication._cache) <= 3


def test_the_cache_can_be_turned_off(settings):
    settings.TOKEN_CACHE_SECONDS = 0
    client, token = _client(UserFactory(roles=["annotator"]))
    assert client.get("/api/v1/whoami").status_code == 200
    assert not authentication._cache
    _from_another_process("DELETE FROM webapp_apitoken WHERE id = %s", token.id)
    assert client.get("/api/v1/whoami").status_code == 401
