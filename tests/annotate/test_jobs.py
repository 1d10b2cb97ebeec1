"""A large upload is imported by a real Celery worker process (Redis broker, PostgreSQL)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Comparison, ImportBatch, Trajectory
from tests.conftest import wait_for
from tests.factories import CampaignFactory
from tests.samples import canonical, jsonl

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _finished(batch_id):
    batch = ImportBatch.objects.get(pk=batch_id)
    return batch if batch.finished else None


def test_large_upload_runs_as_a_job_and_its_rows_appear(celery_worker_process, admin_api, settings):
    settings.IMPORT_INLINE_MAX_BYTES = 100  # anything bigger goes to the worker
    campaign = CampaignFactory()
    data = jsonl(*[canonical(n=i) for i in range(30)])
    response = admin_api.post(
        "/api/v1/imports/",
        {"file": SimpleUploadedFile("big.jsonl", data), "campaign": campaign.id},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    batch = wait_for(lambda: _finished(response.json()["id"]))
    assert batch.status == "succeeded", batch.message
    assert batch.created_count == 30
    assert Trajectory.objects.count() == 30
    assert Comparison.objects.filter(campaign=campaign).count() == 10  # capped per task
    assert admin_api.get(f"/api/v1/imports/{batch.id}/").json()["status"] == "succeeded"


def test_bad_large_upload_fails_in_the_worker_and_stores_nothing(celery_worker_process, admin_api, settings):
    settings.IMPORT_INLINE_MAX_BYTES = 100
    data = jsonl(*[canonical(n=i) for i in range(10)]) + b"{broken\n"
    response = admin_api.post("/api/v1/imports/", {"file": SimpleUploadedFile("big.jsonl", data)}, format="multipart")
    assert response.status_code == 202
    batch = wait_for(lambda: _finished(response.json()["id"]))
    assert batch.status == "failed"
    assert batch.errors == [{"line": 11, "error": batch.errors[0]["error"]}]
    assert Trajectory.objects.count() == 0
