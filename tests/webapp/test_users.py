"""Team management: admins create, invite, deactivate users, give roles, reset passwords and manage tokens.

Services first, then the Users pages, then the REST API; each role check covers every new route.
"""

from __future__ import annotations

import json
import re

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import api_rows, token_client
from tests.factories import UserFactory
from tests.helpers import label_all, make_campaign
from webapp.errors import ArbiterError
from webapp.models import ApiToken
from webapp.roles import Role, user_roles
from webapp.tokens import api_token_create
from webapp.users import services

pytestmark = pytest.mark.django_db
User = get_user_model()


def _log_in(browser: Client, username: str, password: str) -> bool:
    """Through the login form, as a person does (and as the login throttle counts)."""
    browser.post("/login/", {"username": username, "password": password})
    return "_auth_user_id" in browser.session


def _can_log_in(username: str, password: str) -> bool:
    return _log_in(Client(), username, password)


def _set_password_through(link: str, password: str) -> Client:
    """Follow a set-password link as the invited person would; returns their browser."""
    browser = Client()
    path = link.removeprefix("http://testserver")
    first = browser.get(path)
    assert first.status_code == 302 and first["Location"].endswith("/set-password/")
    form = browser.get(first["Location"])
    assert form.status_code == 200 and form.context["validlink"]
    done = browser.post(first["Location"], {"new_password1": password, "new_password2": password})
    assert done.status_code == 302, done.context["form"].errors if done.context else done
    assert browser.get(done["Location"]).status_code == 200
    return browser


# Services


def test_a_created_user_logs_in_with_the_generated_or_given_password():
    user, password = services.user_create(username="mira", email="mira@example.org", roles=["annotator"])
    assert len(password) >= 16 and _can_log_in("mira", password)
    assert user_roles(user) == {Role.ANNOTATOR} and not user.is_staff
    boss, given = services.user_create(username="boss", roles=["admin", "researcher"], password="tall-oak-river-9")
    assert given == "tall-oak-river-9" and _can_log_in("boss", "tall-oak-river-9")
    assert user_roles(boss) == {Role.ADMIN, Role.RESEARCHER} and boss.is_staff  # admins reach the Django admin


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"username": "Taken"}, "A user named 'Taken' already exists"),
        ({"username": "TAKEN"}, "A user named 'TAKEN' already exists"),
        ({"username": "two words"}, "use only letters, digits and the characters @ . + - _ (no spaces)"),
        ({"username": "semi;colon"}, "use only letters, digits and the characters @ . + - _"),
        ({"username": "nul\x00"}, "use only letters, digits"),
        ({"username": "  "}, "Give the user a username."),
        ({"username": "u" * 151}, "at most 150 characters"),
        ({"username": "ok", "roles": ["superhero"]}, "'superhero' is not a role; the roles are annotator, researcher"),
        ({"username": "ok", "roles": "admin"}, "Give the roles as a list"),
        ({"username": "ok", "email": "not-an-email"}, "'not-an-email' is not an email address"),
        ({"username": "ok", "password": "short"}, "This password is too short. It must contain at least 8 characters."),
        ({"username": "ok", "password": "password123"}, "This password is too common."),
        (
            {"username": "okuser", "email": "okuser@example.org", "password": "okuser-example"},
            "The password is too similar to the",
        ),
    ],
)
def test_bad_input_is_refused_with_a_reason_a_person_understands(kwargs, message):
    UserFactory(username="taken")
    before = User.objects.count()
    with pytest.raises(ArbiterError) as exc:
        services.user_create(**kwargs)
    assert message in exc.value.message
    assert User.objects.count() == before


def test_an_admin_cannot_lock_themselves_out_but_can_change_others():
    admin, other = UserFactory(roles=["admin"]), UserFactory(roles=["admin"])
    with pytest.raises(ArbiterError, match="You cannot deactivate yourself"):
        services.user_deactivate(actor=admin, user=admin)
    with pytest.raises(ArbiterError, match="You cannot take your own admin role"):
        services.user_roles_change(actor=admin, user=admin, roles=["researcher"])
    admin.refresh_from_db()
    assert admin.is_active and user_roles(admin) == {Role.ADMIN}
    services.user_roles_change(actor=admin, user=other, roles=["annotator"])
    services.user_deactivate(actor=admin, user=other)
    other.refresh_from_db()
    assert not other.is_active and not other.is_staff


def test_a_deactivated_user_keeps_their_judgements_but_cannot_log_in_or_use_a_token():
    admin = UserFactory(roles=["admin"])
    worker = UserFactory(username="worker", roles=["annotator"])
    label_all(make_campaign(n_comparisons=2, k=1), [worker])
    _, key = api_token_create(user=worker, name="script")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    browser = Client()
    assert _log_in(browser, "worker", "pw-for-tests-1")
    assert api.get("/api/v1/whoami").status_code == 200

    services.user_deactivate(actor=admin, user=worker)
    assert api.get("/api/v1/whoami").status_code == 401
    assert browser.get("/").status_code == 302  # the open session ended
    assert not _can_log_in("worker", "pw-for-tests-1")
    assert worker.judgements.count() == 2 and User.objects.filter(username="worker").exists()

    services.user_reactivate(user=worker)
    assert api.get("/api/v1/whoami").status_code == 200 and _can_log_in("worker", "pw-for-tests-1")


def test_an_invited_user_sets_their_password_through_the_link_once():
    user, path = services.user_invite(username="newbie", email="n@example.org", roles=["annotator"])
    assert not user.has_usable_password()
    assert path.startswith("/team/password/")
    _set_password_through(path, "quiet-lantern-42")
    assert _can_log_in("newbie", "quiet-lantern-42")
    again = Client().get(path, follow=True)
    assert again.status_code == 200 and not again.context["validlink"]
    assert "does not work any more" in again.content.decode()


def test_a_reset_link_voids_the_old_password_and_the_earlier_links():
    user = UserFactory(username="forgetful", roles=["annotator"])
    first = services.user_password_reset_link(user=user)
    assert not _can_log_in("forgetful", "pw-for-tests-1")
    second = services.user_password_reset_link(user=user)
    assert not Client().get(first, follow=True).context["validlink"]
    _set_password_through(second, "brand-new-secret-7")
    assert _can_log_in("forgetful", "brand-new-secret-7")


def test_setting_a_password_uses_the_sites_password_rules():
    user = UserFactory(username="pat")
    with pytest.raises(ArbiterError) as exc:
        services.user_password_set(user=user, password="123")
    assert "too short" in exc.value.message and "too common" in exc.value.message
    assert _can_log_in("pat", "pw-for-tests-1")
    for hostile in ("long-enough\x00", "long-enough\ud800"):
        with pytest.raises(ArbiterError, match="The password cannot be used: it contains a"):
            services.user_password_set(user=user, password=hostile)
    services.user_password_set(user=user, password="violet-harbour-88")
    assert _can_log_in("pat", "violet-harbour-88") and not _can_log_in("pat", "pw-for-tests-1")


def test_an_admin_makes_tokens_for_a_user_and_the_limit_names_them():
    from webapp.tokens import api_token_create

    user, admin = UserFactory(username="bot"), UserFactory(roles=["admin"])
    token, key = api_token_create(user=user, name="ci", by=admin)
    assert token.user == user and len(key) == 40
    for i in range(49):
        api_token_create(user=user, name=f"t{i}", by=admin)
    with pytest.raises(ArbiterError, match="bot has 50 tokens already"):
        api_token_create(user=user, name="one more", by=admin)
    with pytest.raises(ArbiterError, match="You have 50 tokens already"):
        api_token_create(user=user, name="one more")


# Pages

TEAM_PAGES = ["/team/users/", "/team/users/{id}/"]
TEAM_POSTS = [
    "/team/users/",
    "/team/users/{id}/edit",
    "/team/users/{id}/deactivate",
    "/team/users/{id}/reactivate",
    "/team/users/{id}/password",
    "/team/users/{id}/tokens",
    "/team/users/{id}/tokens/{token}/revoke",
]


def test_only_admins_reach_the_users_pages(role_users):
    target = UserFactory(username="target", roles=["annotator"])
    token, _ = api_token_create(user=target, name="x")
    fill = {"id": target.id, "token": token.id}
    for role, user in [*role_users.items(), ("anonymous", None)]:
        client = Client()
        if user:
            client.force_login(user)
        for page in TEAM_PAGES:
            response = client.get(page.format(**fill))
            expected = {"admin": 200, "anonymous": 302}.get(role, 403)
            assert response.status_code == expected, (role, page, response.status_code)
            if role == "anonymous":
                assert response["Location"].startswith("/login/")
        if role == "admin":
            continue  # the admin's POSTs are tested one by one below
        for page in TEAM_POSTS:
            response = client.post(page.format(**fill), {"roles": ["admin"], "name": "n", "how": "link"})
            assert response.status_code == (302 if role == "anonymous" else 403), (role, page)
    target.refresh_from_db()
    assert target.is_active and user_roles(target) == {Role.ANNOTATOR} and target.api_tokens.count() == 1


def test_the_nav_shows_users_to_admins_only(client, role_users):
    client.force_login(role_users["admin"])
    assert 'href="/team/users/"' in client.get("/").content.decode()
    client.force_login(role_users["researcher"])
    assert 'href="/team/users/"' not in client.get("/").content.decode()


def test_the_users_page_lists_everyone_with_their_figures(client, admin_user):
    worker = UserFactory(username="worker", email="w@example.org", roles=["annotator"])
    label_all(make_campaign(n_comparisons=3, k=1), [worker])
    api_token_create(user=worker, name="a")
    api_token_create(user=worker, name="b")
    UserFactory(username="simulated-1", is_synthetic=True, roles=["annotator"])
    gone = UserFactory(username="gone")
    services.user_deactivate(actor=admin_user, user=gone)
    client.force_login(admin_user)
    page = client.get("/team/users/")
    html = page.content.decode()
    row = {u.username: u for u in page.context["users"]}
    assert row["worker"].judgement_count == 3 and row["worker"].token_count == 2
    assert row["worker"].role_names == ["annotator"]
    assert re.search(r"worker</a>.*?w@example.org.*?annotator.*?yes.*?<td>3</td>\s*<td>2</td>", html, re.S)
    assert re.search(r"simulated-1</a>\s*<span class=\"tag\">synthetic</span>", html)
    assert re.search(r"gone</a>.*?deactivated", html, re.S)
    assert 'style="' not in html and "<script>" not in html  # the CSP forbids inline styles and scripts


def test_an_admin_invites_a_user_on_the_page_and_the_link_is_shown_once(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/team/users/",
        {"username": "lina", "email": "lina@example.org", "roles": ["annotator", "researcher"], "how": "invite"},
    )
    lina = User.objects.get(username="lina")
    assert response.status_code == 302 and response["Location"] == f"/team/users/{lina.id}/"
    page = client.get(response["Location"]).content.decode()
    link = re.search(r"http://testserver/team/password/[^<\s]+", page).group(0)
    assert "set-password link" in page and client.get(f"/team/users/{lina.id}/").content.decode().count(link) == 0
    assert user_roles(lina) == {Role.ANNOTATOR, Role.RESEARCHER}
    _set_password_through(link, "sunlit-meadow-31")
    assert _can_log_in("lina", "sunlit-meadow-31")


def test_creating_with_a_generated_password_shows_it_once(client, admin_user):
    client.force_login(admin_user)
    response = client.post("/team/users/", {"username": "gen", "roles": ["annotator"], "how": "password"})
    page = client.get(response["Location"]).content.decode()
    password = re.search(r'<code class="token-key">([^<]+)</code>', page).group(1)
    assert _can_log_in("gen", password)
    assert password not in client.get(response["Location"]).content.decode()


@pytest.mark.parametrize(
    "form, message",
    [
        ({"username": "adm", "how": "invite"}, "A user named &#x27;adm&#x27; already exists"),
        ({"username": "bad name!", "how": "invite"}, "use only letters, digits and the characters @ . + - _"),
        ({"username": "ok", "how": "invite", "roles": ["boss"]}, "boss is not a role; the roles are annotator, "),
        ({"username": "ok", "how": "password", "password": "abc"}, "This password is too short."),
        ({"username": "ok", "how": "invite", "password": "a-good-password-1"}, "Choose one: invite them"),
        ({"username": "a\x00b", "how": "invite"}, "Null characters are not allowed."),
    ],
)
def test_bad_input_on_the_page_answers_400_with_the_reason(client, admin_user, form, message):
    client.force_login(admin_user)
    before = User.objects.count()
    response = client.post("/team/users/", form)
    assert response.status_code == 400 and message in response.content.decode()
    assert User.objects.count() == before


def test_an_admin_edits_roles_and_email_deactivates_and_resets_on_the_users_page(client, admin_user):
    user = UserFactory(username="casey", roles=["annotator"])
    client.force_login(admin_user)
    page = f"/team/users/{user.id}/"
    assert re.search(r'value="annotator"\s+checked', client.get(page).content.decode())
    client.post(f"{page}edit", {"email": "casey@example.org", "roles": ["researcher", "admin"]})
    user.refresh_from_db()
    assert user.email == "casey@example.org" and user_roles(user) == {Role.RESEARCHER, Role.ADMIN}

    html = client.post(f"{page}password", {"how": "password", "password": "1234"}, follow=True).content.decode()
    assert "This password is too short" in html and _can_log_in("casey", "pw-for-tests-1")
    client.post(f"{page}password", {"how": "password", "password": "granite-falcon-5"})
    assert _can_log_in("casey", "granite-falcon-5")
    html = client.post(f"{page}password", {"how": "link"}, follow=True).content.decode()
    assert "/team/password/" in html and not _can_log_in("casey", "granite-falcon-5")

    html = client.post(f"{page}deactivate", follow=True).content.decode()
    assert "is deactivated" in html and not User.objects.get(pk=user.pk).is_active
    client.post(f"{page}reactivate")
    assert User.objects.get(pk=user.pk).is_active


def test_an_admin_is_told_why_they_cannot_lock_themselves_out_on_the_page(client, admin_user):
    client.force_login(admin_user)
    page = f"/team/users/{admin_user.id}/"
    html = client.post(f"{page}edit", {"roles": ["annotator"]}, follow=True).content.decode()
    assert "You cannot take your own admin role" in html
    html = client.post(f"{page}deactivate", follow=True).content.decode()
    assert "You cannot deactivate yourself" in html
    admin_user.refresh_from_db()
    assert admin_user.is_active and user_roles(admin_user) == {Role.ADMIN}


def test_an_admin_creates_and_revokes_a_users_token_on_the_page(client, admin_user):
    user = UserFactory(username="scripted", roles=["researcher"])
    client.force_login(admin_user)
    page = client.post(f"/team/users/{user.id}/tokens", {"name": "notebook"}, follow=True).content.decode()
    key = re.search(r'<code class="token-key">([0-9a-f]{40})</code>', page).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/whoami").json()["username"] == "scripted"
    token = ApiToken.objects.get(user=user)
    assert key not in client.get(f"/team/users/{user.id}/").content.decode()
    html = client.post(f"/team/users/{user.id}/tokens", {"name": "x\x00"}, follow=True).content.decode()
    assert "cannot be stored" in html
    client.post(f"/team/users/{user.id}/tokens/{token.id}/revoke")
    assert api.get("/api/v1/whoami").status_code == 401
    html = client.post(f"/team/users/{user.id}/tokens/{token.id}/revoke", follow=True).content.decode()
    assert "has no token with id" in html


def test_unknown_users_are_404_on_the_pages(client, admin_user):
    client.force_login(admin_user)
    assert client.get("/team/users/999999999/").status_code == 404
    assert client.post("/team/users/999999999/deactivate").status_code == 404
    assert client.get("/team/users/99999999999999999999999/").status_code == 404


# REST API


def _api_routes(user_id: int, token_id: int) -> list[tuple[str, str, dict | None]]:
    base = f"/api/v1/users/{user_id}"
    return [
        ("get", "/api/v1/users/", None),
        ("post", "/api/v1/users/", {"username": "intruder"}),
        ("get", base, None),
        ("patch", base, {"is_active": False}),
        ("post", f"{base}/password", {"link": True}),
        ("get", f"{base}/tokens", None),
        ("post", f"{base}/tokens", {"name": "x"}),
        ("delete", f"{base}/tokens/{token_id}", None),
    ]


def test_only_admins_use_the_users_api(role_users):
    target = UserFactory(username="target", roles=["annotator"])
    token, _ = api_token_create(user=target, name="x")
    for role in ("annotator", "researcher", "anonymous"):
        api = APIClient() if role == "anonymous" else token_client(role_users[role])
        for method, path, body in _api_routes(target.id, token.id):
            response = getattr(api, method)(path, body, format="json")
            assert response.status_code in ((401, 403) if role == "anonymous" else (403,)), (role, method, path)
            assert response.json()["detail"]
    target.refresh_from_db()
    assert target.is_active and target.has_usable_password() and not User.objects.filter(username="intruder")
    admin = token_client(role_users["admin"])
    statuses = [getattr(admin, m)(p, b, format="json").status_code for m, p, b in _api_routes(target.id, token.id)]
    # The last route revokes the target's token: the new password set two routes before revoked it already.
    assert statuses == [200, 201, 200, 200, 200, 200, 201, 404]


def test_the_api_lists_users_with_roles_counts_and_the_synthetic_mark(admin_api):
    worker = UserFactory(username="worker", roles=["annotator"])
    label_all(make_campaign(n_comparisons=2, k=1), [worker])
    UserFactory(username="simulated-1", is_synthetic=True, roles=["annotator"])
    body = {u["username"]: u for u in api_rows(admin_api, "/api/v1/users/")}
    assert body["worker"]["roles"] == ["annotator"] and body["worker"]["judgements"] == 2
    assert body["worker"]["tokens"] == 0 and body["worker"]["is_synthetic"] is False
    assert body["simulated-1"]["is_synthetic"] is True
    assert body["adm"]["roles"] == ["admin"] and body["adm"]["tokens"] == 1
    assert "password" not in body["worker"]


def test_the_api_creates_with_a_generated_password_and_invites_with_a_link(admin_api):
    created = admin_api.post("/api/v1/users/", {"username": "api-made", "roles": ["researcher"]}, format="json")
    assert created.status_code == 201 and created.json()["roles"] == ["researcher"]
    assert _can_log_in("api-made", created.json()["password"])
    given = admin_api.post("/api/v1/users/", {"username": "given", "password": "cobalt-ridge-12"}, format="json")
    assert given.status_code == 201 and "password" not in given.json() and _can_log_in("given", "cobalt-ridge-12")
    invited = admin_api.post(
        "/api/v1/users/",
        {"username": "invitee", "email": "i@example.org", "roles": ["annotator"], "invite": True},
        format="json",
    )
    body = invited.json()
    assert invited.status_code == 201 and body["has_password"] is False and "password" not in body
    assert body["set_password_url"].startswith("http://testserver/team/password/")
    _set_password_through(body["set_password_url"], "amber-willow-77")
    assert _can_log_in("invitee", "amber-willow-77")


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"username": "adm"}, "username", "A user named 'adm' already exists"),
        ({"username": "ADM"}, "username", "A user named 'ADM' already exists"),
        ({"username": "no spaces"}, "username", "use only letters, digits and the characters @ . + - _"),
        (
            {"username": "ok", "roles": ["root"]},
            "roles.0",
            '"root" is not a role; the roles are annotator, researcher,',
        ),
        ({"username": "ok", "roles": "admin"}, "roles", "Expected a list"),
        ({"username": "ok", "password": "x"}, "password", "This password is too short."),
        ({"username": "ok", "password": "x", "invite": True}, None, "Send a password or invite: true, not both."),
        ({"username": "ok", "email": "@@"}, "email", "is not an email address"),
        ({"username": "x" * 100_000}, "username", "no more than 150 characters"),
        ({"username": ["a"]}, "username", "Not a valid string."),
        ({"username": {"a": 1}}, "username", "Not a valid string."),
        ({"username": None}, "username", "This field may not be null."),
        ({"username": 5, "invite": "maybe"}, "invite", "Must be a valid boolean."),
        ({}, "username", "This field is required."),
    ],
)
def test_bad_input_to_the_api_is_a_400_that_says_why(admin_api, body, field, message):
    before = User.objects.count()
    response = admin_api.post("/api/v1/users/", body, format="json")
    assert response.status_code == 400, response.content
    payload = response.json()
    assert message in payload["detail"], payload
    if field:
        assert field in [e.get("field") for e in payload.get("errors", [])], payload
    assert User.objects.count() == before


def test_the_api_patches_email_roles_and_activity(admin_api, admin_user):
    user = UserFactory(username="patchy", roles=["annotator"])
    user_api = token_client(user)
    response = admin_api.patch(
        f"/api/v1/users/{user.id}", {"email": "p@example.org", "roles": ["researcher"]}, format="json"
    )
    assert response.status_code == 200 and response.json()["roles"] == ["researcher"]
    assert response.json()["email"] == "p@example.org" and response.json()["is_active"] is True
    assert admin_api.patch(f"/api/v1/users/{user.id}", {"is_active": False}, format="json").json()["is_active"] is False
    assert user_api.get("/api/v1/whoami").status_code == 401
    # A form-encoded PATCH without is_active changes nothing else.
    admin_api.patch(f"/api/v1/users/{user.id}", {"is_active": True}, format="json")
    admin_api.patch(
        f"/api/v1/users/{user.id}", "email=q%40example.org", content_type="application/x-www-form-urlencoded"
    )
    user.refresh_from_db()
    assert user.is_active and user.email == "q@example.org"

    self_off = admin_api.patch(f"/api/v1/users/{admin_user.id}", {"is_active": False}, format="json")
    assert self_off.status_code == 400 and "You cannot deactivate yourself" in self_off.json()["detail"]
    self_demote = admin_api.patch(f"/api/v1/users/{admin_user.id}", {"roles": []}, format="json")
    assert self_demote.status_code == 400 and "own admin role" in self_demote.json()["detail"]
    # All or nothing: the email is not changed when the deactivation is refused.
    admin_api.patch(f"/api/v1/users/{admin_user.id}", {"email": "new@example.org", "is_active": False}, format="json")
    admin_user.refresh_from_db()
    assert admin_user.is_active and admin_user.email == ""


def test_the_api_sets_a_password_or_answers_a_link(admin_api):
    user = UserFactory(username="pw-user")
    path = f"/api/v1/users/{user.id}/password"
    weak = admin_api.post(path, {"password": "pw-user"}, format="json")
    assert weak.status_code == 400
    assert [e["field"] for e in weak.json()["errors"]] == ["password"] * len(weak.json()["errors"])
    assert "too similar to the username" in weak.json()["detail"]
    assert admin_api.post(path, {}, format="json").status_code == 400
    assert "either a password, or link: true" in admin_api.post(path, {}, format="json").json()["detail"]
    assert admin_api.post(path, {"password": "steel-canyon-4"}, format="json").json() == {"password_set": True}
    assert _can_log_in("pw-user", "steel-canyon-4")
    link = admin_api.post(path, {"link": True}, format="json").json()["set_password_url"]
    assert not _can_log_in("pw-user", "steel-canyon-4")
    _set_password_through(link, "copper-dawn-19")
    assert _can_log_in("pw-user", "copper-dawn-19")


def test_the_api_lists_creates_and_revokes_a_users_tokens(admin_api):
    user = UserFactory(username="tokened", roles=["annotator"])
    created = admin_api.post(f"/api/v1/users/{user.id}/tokens", {"name": "ci"}, format="json")
    assert created.status_code == 201 and len(created.json()["key"]) == 40
    listed = api_rows(admin_api, f"/api/v1/users/{user.id}/tokens")
    assert [t["name"] for t in listed] == ["ci"] and "key" not in listed[0]
    other = UserFactory()
    assert admin_api.delete(f"/api/v1/users/{other.id}/tokens/{created.json()['id']}").status_code == 404
    assert admin_api.delete(f"/api/v1/users/{user.id}/tokens/{created.json()['id']}").status_code == 204
    assert not ApiToken.objects.filter(user=user).exists()
    bad = admin_api.post(f"/api/v1/users/{user.id}/tokens", {"name": ""}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "name"


def _counts() -> dict[str, int]:
    return {
        m._meta.label: m.objects.count()
        for m in apps.get_models()
        if m._meta.app_label in ("webapp", "auth", "annotate") and m._meta.label != "webapp.WorkerBeat"
    }


def test_hostile_input_to_the_users_api_is_refused_and_changes_nothing(admin_api):
    from tests.helpers import RAW_BODIES

    user = UserFactory(username="victim", roles=["annotator"])
    token, _ = api_token_create(user=user, name="t")
    before = _counts()
    writes = [
        ("POST", "/api/v1/users/"),
        ("PATCH", f"/api/v1/users/{user.id}"),
        ("POST", f"/api/v1/users/{user.id}/password"),
        ("POST", f"/api/v1/users/{user.id}/tokens"),
    ]
    typed = [
        {"username": "a\x00b"},
        {"username": "ok", "roles": [{"x": 1}]},
        {"username": "ok", "roles": [None]},
        {"username": "ok", "roles": ["admin"] * 1000},
        {"email": "a\x00@b.c"},
        {"roles": "annotator"},
        {"is_active": "sometimes"},
        {"password": "p" * 5000},
        {"password": 12345678901},
        {"link": [1]},
        {"name": "n" * 101},
        {"name": "\x00"},
        {"username": "ok", "email": "e" * 300 + "@x.org"},
    ]
    for method, path in writes:
        for name, raw in RAW_BODIES.items():
            response = admin_api.generic(method, path, raw, content_type="application/json")
            assert 400 <= response.status_code < 500, (method, path, name, response.content[:200])
            assert response.json()["detail"], (method, path, name)
        for body in typed:
            response = admin_api.generic(method, path, json.dumps(body), content_type="application/json")
            assert 400 <= response.status_code < 500, (method, path, body, response.content[:200])
            assert isinstance(response.json()["detail"], str)
    for path in (
        "/api/v1/users/0",
        "/api/v1/users/999999999999",
        "/api/v1/users/abc",
        "/api/v1/users/99999999999999999999999",
        f"/api/v1/users/{user.id}/tokens/999999999",
        "/api/v1/users/999999999/tokens",
        "/api/v1/users/999999999/password",
    ):
        for method in ("GET", "POST", "PATCH", "DELETE"):
            response = admin_api.generic(method, path, "{}", content_type="application/json")
            assert response.status_code in (404, 405), (method, path, response.status_code)
            assert response["Content-Type"].startswith("application/json")
    assert _counts() == before
    user.refresh_from_db()
    assert user.is_active and user.has_usable_password() and user_roles(user) == {Role.ANNOTATOR}


def test_wrong_passwords_lock_the_login_by_account_and_address_until_an_admin_unlocks(settings):
    """django-axes: after AXES_FAILURE_LIMIT wrong passwords, even the right one is refused, with
    a page saying why; deleting the attempts (the admin's unlock) lets the person in again."""
    from axes.models import AccessAttempt

    settings.AXES_FAILURE_LIMIT = 3
    UserFactory(username="target", roles=["annotator"])
    browser = Client()
    for _ in range(3):
        page = browser.post("/login/", {"username": "target", "password": "wrong"})
    assert page.status_code == 429 and "Too many wrong passwords" in page.content.decode()
    assert not _can_log_in("target", "pw-for-tests-1")  # locked: the right password is refused too
    # By account and address together (issue 45): a colleague behind the same office address logs
    # in, and the same account from another address too (a lock anyone could cause from anywhere
    # would lock the person out).
    UserFactory(username="colleague", roles=["annotator"])
    assert _can_log_in("colleague", "pw-for-tests-1")
    assert _log_in(Client(REMOTE_ADDR="10.0.0.9"), "target", "pw-for-tests-1")
    AccessAttempt.objects.filter(username="target").delete()  # what an admin's unlock does
    assert _can_log_in("target", "pw-for-tests-1")


def test_a_new_password_revokes_the_users_api_tokens():
    user = UserFactory(username="rotating", roles=["annotator"])
    _, key = api_token_create(user=user, name="script")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/whoami").status_code == 200
    services.user_password_set(user=user, password="a-brand-new-passphrase-9")
    assert api.get("/api/v1/whoami").status_code == 401
    assert not ApiToken.objects.filter(user=user).exists()


def test_a_set_password_link_dies_with_deactivation(admin_user):
    user = UserFactory(username="leaver", roles=["annotator"])
    link = services.user_password_reset_link(user=user)
    services.user_deactivate(actor=admin_user, user=user)
    page = Client().get(link, follow=True)
    assert page.status_code == 200 and not page.context["validlink"]


def test_the_access_log_never_holds_a_set_password_token():
    from webapp.gunicorn_logging import redact

    line = '127.0.0.1 "GET /team/password/Mw/cf3x-abcdef123/ HTTP/1.1" 302 "https://h/team/password/Mw/cf3x-abcdef123/"'
    assert "cf3x-abcdef123" not in redact(line) and "/team/password/Mw/[redacted]" in redact(line)
    assert redact("/team/password/Mw/set-password/") == "/team/password/Mw/[redacted]/"


def test_an_admin_cannot_make_anyone_superuser_or_delete_users_in_the_django_admin(admin_user):
    target = UserFactory(username="someone", roles=["annotator"])
    browser = Client()
    browser.force_login(admin_user)
    form = browser.get(f"/admin/webapp/user/{target.pk}/change/").content.decode()
    assert 'name="is_superuser"' not in form and 'name="groups"' not in form
    assert browser.post(f"/admin/webapp/user/{target.pk}/delete/", {"post": "yes"}).status_code == 403
    assert User.objects.filter(pk=target.pk).exists()
