"""A chat judge's key goes only where it was given for (issue 45): an admin who moves the base
URL to another scheme, host or port must give the key again or drop it (API and page alike), and
a judge reads its key only from a variable named for judges, never the deployment's secrets."""

from __future__ import annotations

import pytest

from annotate.models import Judge
from tests.conftest import token_client
from tests.factories import UserFactory
from training.judges.services import judge_api_key

pytestmark = pytest.mark.django_db

URL = "https://models.example.com/v1"


@pytest.fixture
def admin():
    return UserFactory(roles=["admin"])


def _judge(api, **config) -> Judge:
    body = {
        "name": "j",
        "kind": "chat",
        "api_key": "sk-given-for-example",
        "config": {"base_url": URL, "model": "m", **config},
    }
    response = api.post("/api/v1/judges/", body, format="json")
    assert response.status_code == 201, response.content
    return Judge.objects.get(pk=response.json()["id"])


@pytest.mark.parametrize(
    "moved",
    [
        "https://attacker.example.net/v1",
        "http://models.example.com/v1",  # the scheme
        "https://models.example.com:8443/v1",  # the port
        "https://MODELS.example.com.evil.io/v1",
    ],
)
def test_moving_the_base_url_needs_the_key_again_or_drops_it(admin, moved):
    api = token_client(admin)
    judge = _judge(api)
    url = f"/api/v1/judges/{judge.pk}"
    refused = api.patch(url, {"config": {"base_url": moved}}, format="json")
    assert refused.status_code == 400 and "give the key again" in refused.json()["detail"]
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL and judge_api_key(judge) == "sk-given-for-example"
    # Given again with the move: kept; or dropped with it.
    assert api.patch(url, {"config": {"base_url": moved}, "api_key": "sk-for-new"}, format="json").status_code == 200
    judge.refresh_from_db()
    assert judge.config["base_url"] == moved and judge_api_key(judge) == "sk-for-new"
    assert api.patch(url, {"config": {"base_url": URL}, "api_key": ""}, format="json").status_code == 200
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL and not judge.secret


def test_the_same_origin_keeps_the_key(admin):
    api = token_client(admin)
    judge = _judge(api)
    for same in ("https://models.example.com/v2", "https://models.example.com:443/v1", "HTTPS://Models.Example.com/v1"):
        assert api.patch(f"/api/v1/judges/{judge.pk}", {"config": {"base_url": same}}, format="json").status_code == 200
        judge.refresh_from_db()
        assert judge_api_key(judge) == "sk-given-for-example"


def test_the_page_refuses_a_move_without_the_key_and_keeps_the_key(admin, client):
    judge = _judge(token_client(admin))
    client.force_login(admin)
    form = {
        "name": "j",
        "kind": "chat",
        "base_url": "https://elsewhere.example.org/v1",
        "model": "m",
        "structured_output": "json_schema",
    }
    response = client.post(f"/training/judges/{judge.pk}/", form)
    assert response.status_code == 400 and "give the key again" in response.content.decode()
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL and judge.secret


@pytest.mark.parametrize("name", ["DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "HOME", "OPENAI_API_KEY"])
def test_a_judge_never_reads_the_workers_other_variables(admin, name):
    api = token_client(admin)
    body = {"name": "env", "kind": "chat", "config": {"base_url": URL, "model": "m", "api_key_env": name}}
    response = api.post("/api/v1/judges/", body, format="json")
    assert response.status_code == 400 and "ARBITER_JUDGE_" in response.json()["detail"]
    assert not Judge.objects.exists()


def test_a_variable_named_for_judges_or_listed_by_the_deployment_is_read(admin, settings, monkeypatch):
    api = token_client(admin)
    monkeypatch.setenv("ARBITER_JUDGE_OPENAI", "sk-from-env")
    body = {
        "name": "env",
        "kind": "chat",
        "config": {"base_url": URL, "model": "m", "api_key_env": "ARBITER_JUDGE_OPENAI"},
    }
    assert api.post("/api/v1/judges/", body, format="json").status_code == 201
    assert judge_api_key(Judge.objects.get(name="env")) == "sk-from-env"
    settings.JUDGE_KEY_ENV_ALLOWED = frozenset({"OPENAI_API_KEY", "DATABASE_URL"})
    listed = {**body, "name": "listed", "config": {**body["config"], "api_key_env": "OPENAI_API_KEY"}}
    assert api.post("/api/v1/judges/", listed, format="json").status_code == 201
    secret = {**body, "name": "never", "config": {**body["config"], "api_key_env": "DATABASE_URL"}}
    assert api.post("/api/v1/judges/", secret, format="json").status_code == 400  # listed or not


def test_a_stored_key_survives_a_secret_key_rotation_with_fallbacks(admin, settings):
    """Rotating SECRET_KEY with the old one in SECRET_KEY_FALLBACKS keeps stored keys readable;
    a key sealed under a SECRET_KEY in neither is refused with what to do."""
    from webapp.errors import ArbiterError
    from webapp.stored_secrets import secret_open, secret_seal

    settings.SECRET_KEY = "the-first-key-" + "x" * 40
    judge = _judge(token_client(admin))
    sealed_first = judge.secret
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the-second-key-" + "y" * 40, [settings.SECRET_KEY]
    assert judge_api_key(judge) == "sk-given-for-example"
    sealed_second = secret_seal("new")
    assert secret_open(sealed_second) == "new"
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(ArbiterError, match="SECRET_KEY_FALLBACKS"):
        secret_open(sealed_first)
    assert secret_open(sealed_second) == "new"


def _env_judge(api, monkeypatch) -> Judge:
    monkeypatch.setenv("ARBITER_JUDGE_OPENAI", "sk-from-env")
    body = {
        "name": "env",
        "kind": "chat",
        "config": {"base_url": URL, "model": "m", "api_key_env": "ARBITER_JUDGE_OPENAI"},
    }
    response = api.post("/api/v1/judges/", body, format="json")
    assert response.status_code == 201, response.content
    return Judge.objects.get(pk=response.json()["id"])


def test_a_key_named_by_a_variable_follows_a_move_only_when_the_variable_is_named_again(admin, monkeypatch):
    """Issue 53: the key in $ARBITER_JUDGE_... went to whatever address the judge was moved to."""
    api = token_client(admin)
    judge = _env_judge(api, monkeypatch)
    url = f"/api/v1/judges/{judge.pk}"
    moved = "https://attacker.example.net/v1"
    refused = api.patch(url, {"config": {"base_url": moved}}, format="json")
    assert refused.status_code == 400 and "name the variable again" in refused.json()["detail"]
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL and judge.config["api_key_env"] == "ARBITER_JUDGE_OPENAI"
    # The same origin keeps it; named again with the move: it goes there; cleared: no key at all.
    assert api.patch(url, {"config": {"base_url": "https://models.example.com/v2"}}, format="json").status_code == 200
    confirmed = {"config": {"base_url": moved, "api_key_env": "ARBITER_JUDGE_OPENAI"}}
    assert api.patch(url, confirmed, format="json").status_code == 200
    judge.refresh_from_db()
    assert judge.config["base_url"] == moved and judge_api_key(judge) == "sk-from-env"
    assert api.patch(url, {"config": {"base_url": URL, "api_key_env": ""}}, format="json").status_code == 200
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL and judge_api_key(judge) == ""


def test_the_page_moves_a_variables_key_only_when_the_admin_ticks_it(admin, client, monkeypatch):
    judge = _env_judge(token_client(admin), monkeypatch)
    client.force_login(admin)
    form = {
        "name": "env",
        "kind": "chat",
        "base_url": "https://elsewhere.example.org/v1",
        "model": "m",
        "api_key_env": "ARBITER_JUDGE_OPENAI",  # as the page prefills it
        "structured_output": "json_schema",
    }
    page = client.get(f"/training/judges/{judge.pk}/").content.decode()
    assert 'name="confirm_key_env"' in page
    response = client.post(f"/training/judges/{judge.pk}/", form)
    assert response.status_code == 400 and "name the variable again" in response.content.decode()
    judge.refresh_from_db()
    assert judge.config["base_url"] == URL
    assert client.post(f"/training/judges/{judge.pk}/", {**form, "confirm_key_env": "on"}).status_code == 302
    judge.refresh_from_db()
    assert judge.config["base_url"] == "https://elsewhere.example.org/v1" and judge_api_key(judge) == "sk-from-env"


@pytest.mark.parametrize("method", ["post_add", "post_edit"])
def test_a_researcher_changing_a_judge_on_its_pages_gets_a_403_page(admin, client, method):
    """Issue 53: the refusal came back with status 200 and `Content-Type: 403` (render's 4th
    positional argument is the content type)."""
    judge = _judge(token_client(admin))
    client.force_login(UserFactory(roles=["researcher"]))
    url = "/training/judges/" if method == "post_add" else f"/training/judges/{judge.pk}/"
    response = client.post(url, {"name": "x", "kind": "rubric"})
    assert response.status_code == 403 and response["Content-Type"].startswith("text/html")
    assert "needs the admin role" in response.content.decode()
