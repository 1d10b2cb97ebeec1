"""Token authentication reads the roles with the token; whoami shows them."""

import pytest
from rest_framework.test import APIClient

from tests.conftest import token_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_whoami_lists_the_roles_of_the_token_holder():
    user = UserFactory(username="multi", roles=["annotator", "researcher"])
    body = token_client(user).get("/api/v1/whoami").json()
    assert body == {"username": "multi", "roles": ["annotator", "researcher"]}


def test_user_without_roles_is_refused_by_role_checked_routes():
    user = UserFactory(username="norole")
    api = token_client(user)
    assert api.get("/api/v1/whoami").json()["roles"] == []
    assert api.get("/api/v1/assignments/next?campaign=1").status_code == 403


def test_bad_and_inactive_tokens_are_refused():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert client.get("/api/v1/whoami").status_code == 401
    user = UserFactory(roles=["admin"])
    api = token_client(user)
    user.is_active = False
    user.save()
    assert api.get("/api/v1/whoami").status_code == 401
