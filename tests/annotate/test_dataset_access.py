"""Dataset routes against every role, downloads over the web and the API, and a build by a job."""

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from annotate.models import DatasetSnapshot
from annotate.services.datasets import snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from tests.conftest import api_rows, token_client, wait_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def snapshot():
    campaign, _ = voted_campaign([[1, 2], [5, 5], [2, 1], [4, 4]])
    return snapshot_create(name="s", campaigns=[campaign])


def test_researcher_downloads_the_trl_parquet_bundle_with_a_token(researcher, snapshot):
    response = token_client(researcher).get(f"/api/v1/datasets/{snapshot.id}/download?format=trl&filetype=parquet")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert "data/train.parquet" in archive.namelist() and "README.md" in archive.namelist()


@pytest.mark.parametrize("role", ["researcher", "admin"])
def test_data_roles_create_list_and_read_snapshots_over_the_api(role_users, role):
    campaign, _ = voted_campaign([[1, 1], [5, 5]])
    api = token_client(role_users[role])
    created = api.post("/api/v1/datasets/", {"name": "api", "campaigns": [campaign.id]}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["status"] == "succeeded" and body["stats"]["pairs"] == 2
    assert api.get(f"/api/v1/datasets/{body['id']}").json()["content_hash"] == body["content_hash"]
    assert any(s["id"] == body["id"] for s in api_rows(api, "/api/v1/datasets/"))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"name": "x", "campaigns": [424242]}, "No campaign with id 424242"),
        ({"name": "x", "campaigns": []}, "campaigns"),
        ({"name": "x", "campaigns": [1], "aggregation": "median"}, "aggregation"),
    ],
)
def test_bad_snapshot_requests_get_400_and_create_nothing(researcher, payload, reason):
    response = token_client(researcher).post("/api/v1/datasets/", payload, format="json")
    assert response.status_code == 400 and reason in response.content.decode()
    assert DatasetSnapshot.objects.count() == 0


def test_filters_matching_nothing_get_a_clear_400(researcher):
    campaign, _ = voted_campaign([[1, 1]], synthetic=True)
    response = token_client(researcher).post(
        "/api/v1/datasets/", {"name": "x", "campaigns": [campaign.id]}, format="json"
    )
    assert response.status_code == 400 and "No judgement matches" in response.json()["detail"]
    assert DatasetSnapshot.objects.count() == 0


@pytest.mark.parametrize(
    ("query", "status", "reason"),
    [
        ("format=csv&filetype=parquet", 400, "Unknown format"),
        ("format=trl&filetype=xlsx", 400, "Unknown file type"),
    ],
)
def test_bad_downloads(researcher, snapshot, query, status, reason):
    response = token_client(researcher).get(f"/api/v1/datasets/{snapshot.id}/download?{query}")
    assert response.status_code == status and reason in response.json()["detail"]


def test_missing_and_building_snapshots(researcher, snapshot):
    api = token_client(researcher)
    assert api.get("/api/v1/datasets/999999/download?format=trl&filetype=jsonl").status_code == 404
    DatasetSnapshot.objects.filter(pk=snapshot.pk).update(status="running", content_hash="")
    response = api.get(f"/api/v1/datasets/{snapshot.id}/download?format=trl&filetype=jsonl")
    assert response.status_code == 400 and "still building" in response.json()["detail"]


def test_every_dataset_route_checks_the_role(client, role_users, snapshot):
    pages = [
        "/annotate/datasets/",
        f"/annotate/datasets/{snapshot.id}/",
        f"/annotate/datasets/{snapshot.id}/download?format=raw&filetype=jsonl",
    ]
    apis = [
        "/api/v1/datasets/",
        f"/api/v1/datasets/{snapshot.id}",
        f"/api/v1/datasets/{snapshot.id}/download?format=raw&filetype=jsonl",
    ]
    for url in pages:
        assert client.get(url).status_code == 302  # anonymous: to the login page
    for url in apis:
        assert APIClient().get(url).status_code == 401
    for role, allowed in (("annotator", False), ("researcher", True), ("admin", True)):
        client.force_login(role_users[role])
        api = token_client(role_users[role])
        for url in pages:
            assert client.get(url).status_code == (200 if allowed else 403), (role, url)
        for url in apis:
            assert api.get(url).status_code == (200 if allowed else 403), (role, url)
    annotator_api = token_client(role_users["annotator"])
    assert annotator_api.post("/api/v1/datasets/", {"name": "x", "campaigns": [1]}, format="json").status_code == 403


def test_create_and_download_in_the_web_ui(client, researcher):
    campaign, _ = voted_campaign([[1, 1], [5, 4]])
    client.force_login(researcher)
    response = client.post(
        "/annotate/datasets/",
        {
            "name": "web",
            "campaigns": [campaign.id],
            "min_votes": 1,
            "min_agreement": 0,
            "aggregation": "majority",
            "ties": "keep",
            "seed": 0,
            "test_fraction": 0.2,
        },
    )
    assert response.status_code == 302
    snapshot = DatasetSnapshot.objects.get(name="web")
    page = client.get(response["Location"]).content.decode()
    assert snapshot.content_hash in page and "download" in page.lower()
    download = client.get(f"/annotate/datasets/{snapshot.id}/download?format=trl&filetype=jsonl")
    assert download.status_code == 200
    empty = client.post(
        "/annotate/datasets/",
        {
            "name": "none",
            "campaigns": [campaign.id],
            "min_votes": 1,
            "min_agreement": 0,
            "aggregation": "majority",
            "ties": "keep",
            "seed": 0,
            "test_fraction": 0.2,
            "date_from": "2100-01-01",
        },
    )
    assert empty.status_code == 400 and "No judgement matches" in empty.content.decode()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_large_snapshot_is_built_by_a_job(celery_worker_process, researcher, settings):
    settings.SNAPSHOT_INLINE_MAX_JUDGEMENTS = 0
    campaign, _ = voted_campaign([[1, 2], [5, 5]])
    response = token_client(researcher).post(
        "/api/v1/datasets/", {"name": "job", "campaigns": [campaign.id]}, format="json"
    )
    assert response.status_code == 202 and response.json()["status"] == "queued"
    snapshot = wait_for(
        lambda: (
            DatasetSnapshot.objects.exclude(status__in=["queued", "running"]).filter(pk=response.json()["id"]).first()
        )
    )
    assert snapshot.status == "succeeded" and snapshot.stats["pairs"] == 2 and snapshot.progress == 1.0
    # The worker then builds the default download's bundle, named by the content hash, and the
    # download serves that file rather than building one in the web process.
    folder = Path(settings.EXPORT_DIR) / str(snapshot.pk)
    bundle = wait_for(lambda: next(folder.glob(f"{snapshot.content_hash[:12]}-trl-parquet-*.zip"), None))
    download = token_client(researcher).get(f"/api/v1/datasets/{snapshot.pk}/download?format=trl&filetype=parquet")
    assert download.status_code == 200 and b"".join(download.streaming_content) == bundle.read_bytes()
    assert len(list(folder.glob("*.zip"))) == 1


def test_a_worker_loads_pandas_when_it_starts_so_no_export_pays_for_it():
    """pyarrow imports pandas the first time it converts a Python or numpy object (0.3-1.4 s,
    issue 56): a worker does it once at start (Celery's worker_init), before any export."""
    code = (
        "import sys, django; django.setup(); import annotate.tasks; from celery.signals import worker_init; "
        "before = 'pandas' in sys.modules; worker_init.send(sender=None); print(before, 'pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True"], done.stderr[-2000:]


def test_the_snapshot_page_shows_the_dataset_card(client, researcher, snapshot):
    client.force_login(researcher)
    page = client.get(f"/annotate/datasets/{snapshot.pk}/").content.decode()
    assert 'id="card"' in page and "pretty_name: " in page and "RewardTrainer" in page
    assert "<h2>Columns</h2>" in page and "load_dataset" in page
    kto = client.get(f"/annotate/datasets/{snapshot.pk}/?card=kto").content.decode()
    assert "KTOTrainer" in kto
    assert "RewardTrainer" in client.get(f"/annotate/datasets/{snapshot.pk}/?card=nope").content.decode()
