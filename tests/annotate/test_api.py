"""POST /api/v1/trajectories/ and the upload API: roles, success, and clear 4xx on bad input."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotate.models import Comparison, ImportBatch, Trajectory
from tests.conftest import token_client
from tests.factories import CampaignFactory
from tests.samples import canonical, chat_parallel, jsonl

pytestmark = pytest.mark.django_db
URL = "/api/v1/trajectories/"


def test_anonymous_callers_are_refused():
    response = APIClient().post(URL, canonical(), format="json")
    assert response.status_code == 401
    assert Trajectory.objects.count() == 0


@pytest.mark.parametrize("role", ["annotator", "researcher"])
def test_non_admin_roles_are_refused(role_users, role):
    response = token_client(role_users[role]).post(URL, canonical(), format="json")
    assert response.status_code == 403
    assert "admin role" in response.json()["detail"]
    assert Trajectory.objects.count() == 0


def test_admin_posts_one_object(admin_api):
    response = admin_api.post(URL, canonical(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["created"] == 1 and body["duplicates"] == 0
    assert body["trajectory_ids"] == [Trajectory.objects.get().id]


def test_admin_posts_a_list_in_both_formats_into_a_campaign(admin_api):
    campaign = CampaignFactory()
    response = admin_api.post(
        f"{URL}?campaign={campaign.id}", [canonical(n=0), canonical(n=1), chat_parallel()], format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["created"] == 3
    assert response.json()["comparisons_created"] == 1
    assert Comparison.objects.filter(campaign=campaign).count() == 1


def test_bad_items_give_400_with_every_reason_and_store_nothing(admin_api):
    bad = [canonical(n=0), {"schema": "arbiter.trajectory/v7"}, canonical(n=1, steps=[{"kind": "x"}])]
    response = admin_api.post(URL, bad, format="json")
    assert response.status_code == 400
    body = response.json()
    assert [e["line"] for e in body["errors"]] == [2, 3]
    assert "unknown schema version" in body["errors"][0]["message"]
    assert Trajectory.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        ("{not json", "application/json", "invalid JSON at line 1, column 2"),
        ("42", "application/json", "one trajectory object or a list"),
        ("[]", "application/json", "the list is empty"),
    ],
)
def test_malformed_bodies_give_400(admin_api, body, content_type, reason):
    response = admin_api.generic("POST", URL, body, content_type=content_type)
    assert response.status_code == 400
    assert reason in response.json()["detail"]


def test_unknown_campaign_gives_400(admin_api):
    response = admin_api.post(f"{URL}?campaign=999999", canonical(), format="json")
    assert response.status_code == 400
    assert "No campaign with id" in response.json()["detail"]
    assert Trajectory.objects.count() == 0


def test_body_over_the_limit_gives_413(admin_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = admin_api.generic(
        "POST", URL, json.dumps([canonical(n=i) for i in range(20)]), content_type="application/json"
    )
    assert response.status_code == 413
    assert Trajectory.objects.count() == 0


def test_small_upload_is_imported_at_once(admin_api):
    upload = SimpleUploadedFile("t.jsonl", jsonl(canonical(n=0), chat_parallel()))
    response = admin_api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "succeeded"
    assert response.json()["created_count"] == 2
    detail = admin_api.get(f"/api/v1/imports/{response.json()['id']}/")
    assert detail.json()["created_count"] == 2


def test_bad_upload_answers_400_with_the_lines(admin_api):
    upload = SimpleUploadedFile("t.jsonl", jsonl(canonical()) + b"{x\n")
    response = admin_api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("Nothing was imported")  # the API's one error shape
    assert body["errors"][0]["line"] == 2 and "invalid JSON" in body["errors"][0]["message"]
    assert body["import"]["status"] == "failed" and body["import"]["id"] == ImportBatch.objects.get().id
    assert Trajectory.objects.count() == 0


def test_upload_over_the_limit_is_refused(admin_api, settings):
    settings.IMPORT_MAX_UPLOAD_BYTES = 100
    upload = SimpleUploadedFile("t.jsonl", jsonl(canonical()))
    response = admin_api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 413
    assert "over the limit of 100 bytes" in response.json()["detail"]
    assert ImportBatch.objects.count() == 0 and Trajectory.objects.count() == 0


@pytest.mark.parametrize("role", ["annotator", "researcher"])
def test_upload_and_status_routes_refuse_non_admins(role_users, role):
    client = token_client(role_users[role])
    upload = SimpleUploadedFile("t.jsonl", jsonl(canonical()))
    assert client.post("/api/v1/imports/", {"file": upload}, format="multipart").status_code == 403
    assert client.get("/api/v1/imports/1/").status_code == 403
    assert APIClient().get("/api/v1/imports/1/").status_code == 401


def test_openapi_schema_is_generated(admin_api):
    response = admin_api.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "/api/v1/trajectories/" in response.content.decode()


# GET /api/v1/trajectories/<id>/: a trajectory read back as canonical JSON (issue 53).


def _complete(task_id="rt-1") -> dict:
    """A canonical trajectory with every part an import stores."""
    document = canonical(
        task_id=task_id,
        task={
            "external_id": task_id,
            "prompt": "Who founded Veloran?",
            "environment": "encyclopedia",
            "reference_answer": "Ilse Marrow",
            "split": "eval",
            "metadata": {"source": "hand"},
        },
        outcome={"correct": True, "utility": 7.0, "steps": 2},
        metadata={"tools": [{"type": "function", "function": {"name": "search"}}], "note": "kept"},
    )
    document["answer"] = "Ilse Marrow"
    return document


def _imported(client, document: dict) -> int:
    created = client.post(URL, document, format="json")
    assert created.status_code == 201, created.content
    (trajectory_id,) = created.json()["trajectory_ids"]
    return trajectory_id


def test_an_imported_trajectory_reads_back_as_it_was_imported(admin_api):
    sent = _complete()
    trajectory_id = _imported(admin_api, sent)
    response = admin_api.get(f"{URL}{trajectory_id}/")
    assert response.status_code == 200, response.content
    assert response.json() == sent
    # What comes back imports again as the same trajectory: a duplicate, not a second row.
    again = admin_api.post(URL, response.json(), format="json").json()
    assert again["created"] == 0 and again["duplicates"] == 1 and again["trajectory_ids"] == [trajectory_id]


def test_a_transcript_reads_back_in_canonical_form(admin_api):
    from annotate.trajectory_formats import parse_trajectory

    trajectory_id = _imported(admin_api, chat_parallel())
    document = admin_api.get(f"{URL}{trajectory_id}/").json()
    assert document["schema"] == "arbiter.trajectory/v1"
    assert document["agent"] == {"name": "chat-agent", "version": "2"} and document["answer"] == "Drevholm"
    assert [s["kind"] for s in document["steps"]][:2] == ["thought", "action"]
    stored = Trajectory.objects.get(pk=trajectory_id)
    assert parse_trajectory(document, format="canonical").content_hash == stored.content_hash


def test_reading_a_trajectory_back_follows_the_roles(role_users, admin_api):
    trajectory_id = _imported(admin_api, _complete())
    read = token_client(role_users["researcher"]).get(f"{URL}{trajectory_id}/")
    assert read.status_code == 200 and read.json()["task"]["reference_answer"] == "Ilse Marrow"
    refused = token_client(role_users["annotator"]).get(f"{URL}{trajectory_id}/")
    assert refused.status_code == 403 and "Ilse Marrow" not in refused.content.decode()
    assert "researcher or admin role" in refused.json()["detail"]
    assert APIClient().get(f"{URL}{trajectory_id}/").status_code == 401


def test_an_unknown_or_malformed_trajectory_id_is_a_json_404(admin_api):
    for path in ("987654321/", "0/", "abc/", "%D9%A3/", "1234567890123456789012/"):
        response = admin_api.get(f"{URL}{path}")
        assert response.status_code == 404, path
        assert response["Content-Type"].startswith("application/json") and response.json()["detail"], path
    assert admin_api.get(f"{URL}987654321/").json()["detail"] == "No trajectory with id 987654321."
