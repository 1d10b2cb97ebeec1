"""Login, logout, the home page per role, the Django admin, and the security headers."""

import pytest

from tests.factories import UserFactory
from webapp.roles import Role, user_roles

pytestmark = pytest.mark.django_db


def test_home_needs_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_login_with_password_then_logout(client):
    UserFactory(username="pat", roles=["annotator"])
    response = client.post("/login/", {"username": "pat", "password": "pw-for-tests-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_wrong_password_is_refused_with_a_message(client):
    UserFactory(username="pat")
    response = client.post("/login/", {"username": "pat", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


@pytest.mark.parametrize(
    ("role", "shown", "hidden"),
    [
        ("annotator", ["role-annotator"], ["role-researcher", "role-admin", "Import trajectories"]),
        ("researcher", ["role-researcher"], ["role-annotator", "role-admin", "Import trajectories"]),
        ("admin", ["role-admin", "Import trajectories"], ["role-annotator", "role-researcher"]),
    ],
)
def test_home_shows_each_role_what_it_may_do(client, role_users, role, shown, hidden):
    client.force_login(role_users[role])
    page = client.get("/").content.decode()
    for text in shown:
        assert text in page
    for text in hidden:
        assert text not in page


def test_user_without_role_is_told_to_ask_for_one(client):
    client.force_login(UserFactory())
    assert "has no role yet" in client.get("/").content.decode()


def test_django_admin_is_for_admins_only(client, role_users):
    client.force_login(role_users["admin"])
    assert client.get("/admin/annotate/trajectory/").status_code == 200
    client.force_login(role_users["researcher"])
    assert client.get("/admin/annotate/trajectory/").status_code == 302  # not staff: to admin login


def test_pages_send_a_content_security_policy_without_inline_script(client, admin_user):
    client.force_login(admin_user)
    csp = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_roles_and_superuser():
    user = UserFactory(roles=["researcher", "annotator"])
    assert user_roles(user) == {Role.RESEARCHER, Role.ANNOTATOR}
    boss = UserFactory(is_superuser=True)
    assert user_roles(boss) == set(Role)


def test_role_groups_carry_their_permissions(role_users):
    assert role_users["annotator"].has_perm("webapp.label_comparisons")
    assert not role_users["annotator"].has_perm("webapp.download_datasets")
    assert role_users["researcher"].has_perm("webapp.download_datasets")
    assert role_users["researcher"].has_perm("annotate.view_judgement")
    assert not role_users["researcher"].has_perm("annotate.change_judgement")
    assert role_users["admin"].has_perm("annotate.change_campaign")
    assert role_users["admin"].is_staff


def test_health_answers_without_a_session(client):
    assert client.get("/health").json() == {"ok": True}
