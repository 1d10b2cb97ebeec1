"""Each user's own API tokens: created with the key shown once, listed, used, revoked."""

import pytest
from rest_framework.test import APIClient

from tests.conftest import api_rows, token_client
from tests.factories import UserFactory
from webapp.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_user_creates_uses_and_revokes_a_token_on_their_page(client):
    user = UserFactory(username="tok", roles=["annotator"])
    client.force_login(user)
    page = client.post("/account/tokens/", {"name": "my script"})
    assert page.status_code == 200
    key = page.context["new_key"]
    assert key and key in page.content.decode()
    token = ApiToken.objects.get(user=user)
    assert token.key_hash != key and key not in token.key_hash  # only a hash is stored

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/whoami").json()["username"] == "tok"
    listed = client.get("/account/tokens/").content.decode()
    assert "my script" in listed and key not in listed  # shown once only

    client.post(f"/account/tokens/{token.id}/revoke")
    assert api.get("/api/v1/whoami").status_code == 401


def test_tokens_over_the_api_are_the_callers_own(role_users):
    annotator, admin = role_users["annotator"], role_users["admin"]
    api = token_client(annotator)
    created = api.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert created.status_code == 201 and len(created.json()["key"]) == 40
    listed = api_rows(api, "/api/v1/tokens/")
    assert "ci" in [t["name"] for t in listed] and all("key" not in t for t in listed)
    # Another user cannot see or revoke it, not even an admin through the API.
    other = token_client(admin)
    assert "ci" not in [t["name"] for t in api_rows(other, "/api/v1/tokens/")]
    assert other.delete(f"/api/v1/tokens/{created.json()['id']}").status_code == 404
    assert api.delete(f"/api/v1/tokens/{created.json()['id']}").status_code == 204
    assert not ApiToken.objects.filter(pk=created.json()["id"]).exists()


def test_a_token_needs_a_name_and_anonymous_users_have_none(client):
    user = UserFactory(roles=["researcher"])
    client.force_login(user)
    assert client.post("/account/tokens/", {"name": "  "}).status_code == 400
    assert APIClient().get("/api/v1/tokens/").status_code in (401, 403)
    client.logout()
    assert client.get("/account/tokens/").status_code == 302


def test_admins_reach_users_groups_and_tokens_in_the_django_admin(client, admin_user):
    client.force_login(admin_user)
    index = client.get("/admin/").content.decode()
    for section in ("/admin/webapp/user/", "/admin/auth/group/", "/admin/webapp/apitoken/"):
        assert section in index, section
        assert client.get(section).status_code == 200


def test_the_command_prints_a_working_key(capsys):
    from django.core.management import CommandError, call_command

    UserFactory(username="cli", roles=["admin"])
    call_command("create_api_token", "cli", "--name", "setup script")
    key = capsys.readouterr().out.strip()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/whoami").json()["username"] == "cli"
    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_token", "nobody")
