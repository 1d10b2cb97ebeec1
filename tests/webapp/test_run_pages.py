"""Run pages and API against every role; the launch form; live polling that stops at the end."""
import pytest

from annotate.models import Policy
from tests.conftest import token_client
from webapp.models import Run, RunMetric

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_queue(monkeypatch):
    monkeypatch.setattr("webapp.runs.services._enqueue", lambda run: None)


@pytest.fixture
def run(admin_user):
    run = Run.objects.create(kind="rollout", name="r", status="running", created_by=admin_user, attempt=1,
                             config={"policy_id": 1}, lineage=[{"direction": "input", "type": "policy", "id": 1,
                                                                "label": "tiny@1", "url": "/training/policies/1/"}])
    RunMetric.objects.create(run=run, step=1, values={"loss/train": 2.0, "loss/eval": 2.5})
    RunMetric.objects.create(run=run, step=2, values={"loss/train": 1.0})
    return run


PAGES = ["/runs/", "/runs/{id}/", "/training/policies/"]


@pytest.mark.parametrize("url", PAGES)
def test_run_pages_by_role(client, role_users, run, url):
    url = url.format(id=run.pk)
    assert client.get(url).status_code == 302  # anonymous: to the login page
    for role, expected in (("annotator", 403), ("researcher", 200), ("admin", 200)):
        client.force_login(role_users[role])
        assert client.get(url).status_code == expected, (role, url)


def test_launch_cancel_and_resume_are_for_admins_only(client, api_client_for, role_users, run):
    for role in ("annotator", "researcher"):
        client.force_login(role_users[role])
        assert client.get("/runs/new/rollout/").status_code == 403
        assert client.post(f"/runs/{run.pk}/cancel").status_code == 403
        assert client.post(f"/runs/{run.pk}/resume").status_code == 403
        api = api_client_for(role)
        assert api.post("/api/v1/runs/", {"kind": "rollout"}, format="json").status_code == 403
        assert api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 403
        assert api.post(f"/api/v1/runs/{run.pk}/resume").status_code == 403
    assert api_client_for("annotator").get(f"/api/v1/runs/{run.pk}").status_code == 403
    assert api_client_for("researcher").get(f"/api/v1/runs/{run.pk}").json()["metrics"]["loss/train"] == [[1, 2.0],
                                                                                                       [2, 1.0]]
    assert Run.objects.get(pk=run.pk).status == "running"


@pytest.fixture
def api_client_for(role_users):
    return lambda role: token_client(role_users[role])


def test_the_run_page_polls_while_active_and_stops_when_done(client, admin_user, run):
    client.force_login(admin_user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' in page and "tiny@1" in page and "<svg" in page and "Cancel" in page
    assert client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true").status_code == 200
    Run.objects.filter(pk=run.pk).update(status="succeeded", progress=1.0)
    fragment = client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 286 and "hx-trigger" not in fragment.content.decode()


def test_cancel_from_the_page_asks_the_running_job_to_stop(client, admin_user, run):
    client.force_login(admin_user)
    client.post(f"/runs/{run.pk}/cancel")
    assert Run.objects.get(pk=run.pk).cancel_requested


def test_the_launch_form_refuses_a_bad_config_with_the_reason_and_queues_nothing(client, admin_user, tmp_path):
    client.force_login(admin_user)
    form = client.get("/runs/new/rollout/").content.decode()
    assert "Samples per task" in form and "episodes per task" in form  # label and help text
    missing = client.post("/runs/new/rollout/", {"idempotency_key": "a", "policy_id": "", "environment": "encyclopedia", "split": "train",
                                                 "tasks": 5, "samples_per_task": 1, "temperature": -1,
                                                 "campaign_id": 0, "seed": 0})
    assert missing.status_code == 400 and not Run.objects.filter(kind="rollout", name="x").exists()
    (tmp_path / "config.json").write_text("{}")
    policy = Policy.objects.create(name="p", model_dir=str(tmp_path))
    bad = client.post("/runs/new/rollout/", {"idempotency_key": "b", "name": "x", "policy_id": policy.pk,
                                             "environment": "encyclopedia", "split": "train", "tasks": 5, "samples_per_task": 1,
                                             "temperature": -1, "campaign_id": 0, "seed": 0})
    assert bad.status_code == 400 and "temperature: 0 (greedy) or more" in bad.content.decode()
    assert not Run.objects.filter(name="x").exists()
    ok = {"idempotency_key": "c", "name": "x", "policy_id": policy.pk, "environment": "encyclopedia",
          "split": "train", "tasks": 5,
          "samples_per_task": 1, "temperature": 1, "campaign_id": 0, "seed": 0}
    first, second = client.post("/runs/new/rollout/", ok), client.post("/runs/new/rollout/", ok)  # double click
    assert first.status_code == second.status_code == 302 and first.url == second.url
    assert Run.objects.filter(name="x").count() == 1


def test_api_launch_refuses_bad_configs_with_reasons(admin_user):
    api = token_client(admin_user)
    response = api.post("/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": 999, "tasks": 0}},
                        format="json")
    assert response.status_code == 400
    assert "tasks: at least 1." in response.json()["detail"]
    response = api.post("/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": 999}}, format="json")
    assert response.status_code == 400 and "No policy with id 999" in response.json()["detail"]
    assert not Run.objects.filter(kind="rollout").exclude(name="r").exists()
