"""Issue 53: a request body over its route's limit is refused from its declared length before a
byte of it is read: any form POST, anonymous included, used to be read up to 50 MB (CSRF's form
parsing reads it), and the HTML correction route read 30 MB before its 1 MB refusal. The
request's input here fails the test if anything reads it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from annotate.models import Correction
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.helpers import imported_comparison_assignment
from tests.samples import canonical

pytestmark = pytest.mark.django_db
MB = 1024 * 1024
CSRF = "a" * 32  # a well-formed CSRF cookie, as a client that fetched the login page holds


class Unreadable:
    """A request body that must not be read."""

    def read(self, *args):
        raise AssertionError("the body was read")

    readline = read


def _post(client, path: str, declared: int, content_type: str = "application/x-www-form-urlencoded", **extra):
    return client.generic(
        "POST",
        path,
        b"x",
        content_type=content_type,
        CONTENT_LENGTH=str(declared),
        **{"wsgi.input": Unreadable()},
        **extra,
    )


def test_a_45_mb_anonymous_login_post_is_refused_unread_with_the_limit():
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF
    response = _post(client, "/login/", 45 * MB)
    assert response.status_code == 413
    text = response.content.decode()
    assert "47,185,920 bytes" in text and "at most 65,536 bytes" in text and "ANONYMOUS_MAX_BODY_BYTES" in text
    assert "Nothing was read" in text


def test_an_anonymous_post_to_an_upload_route_gets_the_anonymous_limit():
    """The import page takes 512 MB from an admin; from nobody logged in (a made-up session
    cookie is nobody), no more than a login form."""
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = CSRF
    client.cookies["sessionid"] = "made-up"
    response = _post(client, "/annotate/imports/", 100 * MB, content_type="multipart/form-data; boundary=x")
    assert response.status_code == 413 and "ANONYMOUS_MAX_BODY_BYTES" in response.content.decode()


def test_the_html_correction_route_refuses_30_mb_unread():
    annotator = UserFactory(roles=["annotator"])
    assignment = imported_comparison_assignment(annotator)
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    client.cookies["csrftoken"] = CSRF
    response = _post(client, f"/annotate/assignments/{assignment.pk}/correction/", 30 * MB)
    assert response.status_code == 413
    text = response.content.decode()
    assert "at most 1,000,000 bytes" in text and "CORRECTION_MAX_BODY_BYTES" in text
    assert not Correction.objects.exists()


def test_the_api_refuses_by_route_with_json_naming_the_limit():
    annotator = UserFactory(roles=["annotator"])
    assignment = imported_comparison_assignment(annotator)
    api = token_client(annotator)
    response = _post(api, f"/api/v1/assignments/{assignment.pk}/correction", 30 * MB, content_type="application/json")
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    assert "at most 1,000,000 bytes (CORRECTION_MAX_BODY_BYTES)" in response.json()["detail"]
    # Any other route takes a form's or a small JSON's worth: 3 MB of campaign settings is refused.
    admin = token_client(UserFactory(roles=["admin"]))
    response = _post(admin, "/api/v1/campaigns/", 3 * MB, content_type="application/json")
    assert response.status_code == 413 and "(FORM_MAX_BODY_BYTES)" in response.json()["detail"]
    assert not Correction.objects.exists()


def test_the_import_route_takes_more_than_a_form_and_refuses_over_its_own_limit(settings):
    settings.FORM_MAX_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000, 100_000
    admin = token_client(UserFactory(roles=["admin"]))
    body = json.dumps([canonical(n=i) for i in range(5)])
    assert 1000 < len(body) < 100_000
    response = admin.generic("POST", "/api/v1/trajectories/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    response = _post(admin, "/api/v1/trajectories/", 45 * MB, content_type="application/json")
    assert response.status_code == 413 and "at most 100,000 bytes (API_MAX_BODY_BYTES)" in response.json()["detail"]
