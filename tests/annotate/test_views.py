"""The import pages: admin only; upload, result, and the polling fragment."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import ImportBatch, Trajectory
from tests.samples import canonical, jsonl

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/annotate/imports/", "/annotate/imports/1/"])
def test_anonymous_users_are_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", ["annotator", "researcher"])
@pytest.mark.parametrize("url", ["/annotate/imports/", "/annotate/imports/1/"])
def test_other_roles_get_403(client, role_users, role, url):
    client.force_login(role_users[role])
    assert client.get(url).status_code == 403
    upload = SimpleUploadedFile("t.jsonl", jsonl(canonical()))
    assert client.post("/annotate/imports/", {"file": upload}).status_code == 403
    assert Trajectory.objects.count() == 0


def test_admin_uploads_a_small_file_and_sees_the_result(client, admin_user):
    client.force_login(admin_user)
    upload = SimpleUploadedFile("mine.jsonl", jsonl(canonical(n=0), canonical(n=1)))
    response = client.post("/annotate/imports/", {"file": upload}, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Imported 2 trajectories" in page
    assert "mine.jsonl" in page
    assert Trajectory.objects.count() == 2


def test_bad_file_shows_every_bad_line_escaped_and_imports_nothing(client, admin_user):
    client.force_login(admin_user)
    bad = b'{"schema": "<script>alert(1)</script>"}\n'
    upload = SimpleUploadedFile("bad.jsonl", jsonl(canonical()) + bad + b"{x\n")
    response = client.post("/annotate/imports/", {"file": upload}, follow=True)
    page = response.content.decode()
    assert "Nothing was imported: 2 bad line(s)" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert Trajectory.objects.count() == 0


def test_upload_over_the_limit_shows_the_reason(client, admin_user, settings):
    settings.IMPORT_MAX_UPLOAD_BYTES = 10
    client.force_login(admin_user)
    response = client.post("/annotate/imports/", {"file": SimpleUploadedFile("t.jsonl", jsonl(canonical()))})
    assert response.status_code == 413
    assert "over the limit of 10 bytes" in response.content.decode()
    assert ImportBatch.objects.count() == 0


def test_status_fragment_stops_polling_when_the_import_is_done(client, admin_user):
    client.force_login(admin_user)
    running = ImportBatch.objects.create(filename="a.jsonl", status="running")
    done = ImportBatch.objects.create(filename="b.jsonl", status="succeeded")
    live = client.get(f"/annotate/imports/{running.id}/", HTTP_HX_REQUEST="true")
    assert live.status_code == 200 and 'hx-trigger="every 1s"' in live.content.decode()
    assert "<html" not in live.content.decode()
    finished = client.get(f"/annotate/imports/{done.id}/", HTTP_HX_REQUEST="true")
    assert finished.status_code == 286


def test_stale_running_import_is_marked_failed(client, admin_user, settings):
    from datetime import timedelta

    from django.utils import timezone

    from webapp.jobs import jobs_sweep_stale

    client.force_login(admin_user)
    stale = ImportBatch.objects.create(
        filename="a.jsonl", status="running", heartbeat_at=timezone.now() - timedelta(hours=2)
    )
    fresh = ImportBatch.objects.create(filename="b.jsonl", status="running", heartbeat_at=timezone.now())
    assert jobs_sweep_stale()["annotate.ImportBatch"] == 1
    page = client.get(f"/annotate/imports/{stale.id}/").content.decode()
    stale.refresh_from_db()
    assert stale.status == "failed" and stale.finished_at and "worker stopped" in stale.error
    assert "worker stopped" in page
    assert ImportBatch.objects.get(pk=fresh.pk).status == "running"


@pytest.mark.django_db
def test_the_first_start_says_on_the_home_page_that_the_agent_is_training_and_what_follows(client):
    """While the behaviour-cloning run that will fill a campaign is queued or running (a first
    `make run`), every role's home page says so, links the run, and names the campaign it fills."""
    from tests.factories import CampaignFactory, UserFactory
    from webapp.models import Run

    campaign = CampaignFactory(name="Demo: encyclopedia QA")
    run = Run.objects.create(
        kind="bc",
        name="Policy default-bc (behaviour cloning)",
        status="running",
        progress=0.4,
        progress_message="behaviour cloning",
        config={"policy_name": "default-bc", "rollout_campaign_id": campaign.pk},
    )
    for role in ("annotator", "researcher", "admin"):
        client.force_login(UserFactory(roles=[role]))
        page = client.get("/").content.decode()
        assert 'id="first-start"' in page and f"Run #{run.pk} is running" in re.sub(r"<[^>]+>", "", page), role
        # Linked only for the roles that may open a run (an annotator's link would be a 403).
        assert (f'href="/runs/{run.pk}/"' in page) == (role != "annotator"), role
        assert "default-bc" in page and "Demo: encyclopedia QA" in page and "40.0%" in page
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert 'id="first-start"' not in client.get("/").content.decode()
