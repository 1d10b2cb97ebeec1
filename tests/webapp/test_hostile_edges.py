"""Hostile values found by an outside fuzz (issue 45), each at every level of its body: JSON
nested past the decoder's stack in an import (one line, or its metadata), a lone surrogate
inside a run's config, ids written with digits `int` refuses ("²", "٣"). Each is a 4xx with a
JSON body naming the problem, and nothing is stored."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Trajectory
from tests.conftest import token_client
from tests.factories import CampaignFactory, UserFactory
from tests.samples import canonical

pytestmark = pytest.mark.django_db

ODD_IDS = ["²", "٣", "1.0", "-1", "0x1", "9" * 30, "½", 2**63, -5, 1.5, True, [], {}]


def _refused(response):
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert response.json()["detail"]
    return response.json()


def _nested_text(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


@pytest.fixture
def admin():
    return token_client(UserFactory(roles=["admin"]))


@pytest.mark.parametrize("depth", [100, 940, 1000, 5000])
def test_an_import_line_nested_past_the_decoders_stack_is_refused_with_the_line(admin, depth):
    trajectory = json.dumps(canonical(n=0))
    lines = {
        "a line that is only nesting": "[" * depth + "]" * depth,
        "its metadata so nested": trajectory.replace('"schema"', f'"metadata": {_nested_text(depth)}, "schema"', 1),
    }
    for name, line in lines.items():
        for body in (line.encode() + b"\n", line.encode() + b"\n" + trajectory.encode() + b"\n"):
            upload = SimpleUploadedFile("t.jsonl", body)
            refused = _refused(admin.post("/api/v1/imports/", {"file": upload}, format="multipart"))
            assert "nested more than 64 levels" in json.dumps(refused), (name, refused)
            inline = admin.generic("POST", "/api/v1/imports/", body, content_type="application/x-ndjson")
            assert inline.status_code < 500, (name, inline.status_code, inline.content[:300])
    assert not Trajectory.objects.exists()


@pytest.mark.parametrize(
    "config",
    [
        '{"environment": "\\ud800"}',
        '{"tasks": 3, "environment": "encyclopedia", "name": "\\udfff"}',
        '{"policy_name": ["\\ud800"]}',
        '{"x": {"y": {"z": "\\ud800"}}}',
        '{"\\ud800": 1}',
    ],
)
def test_a_lone_surrogate_anywhere_in_a_runs_config_is_refused(admin, config):
    raw = '{"kind": "rollout", "name": "r", "config": ' + config + "}"
    refused = _refused(admin.generic("POST", "/api/v1/runs/", raw, content_type="application/json"))
    assert "surrogate" in json.dumps(refused)


@pytest.mark.parametrize("value", ODD_IDS)
def test_an_id_written_with_odd_digits_is_refused_not_a_500(admin, value):
    campaign = CampaignFactory()
    refused = _refused(admin.patch(f"/api/v1/campaigns/{campaign.pk}", {"shown_judge": value}, format="json"))
    assert "shown_judge" in json.dumps(refused)


def test_a_refusal_that_quotes_a_lone_surrogate_is_still_json(admin):
    """The reply quotes what was wrong (a key, a value): written as an escape, never a 500."""
    campaign = CampaignFactory()
    raw = '{"shown_judge": "\\ud800"}'
    refused = _refused(admin.generic("PATCH", f"/api/v1/campaigns/{campaign.pk}", raw, content_type="application/json"))
    assert "surrogate" in refused["detail"]
    raw = '{"kind": "rollout", "config": {"\\ud800\\u0000": 1}}'
    refused = _refused(admin.generic("POST", "/api/v1/runs/", raw, content_type="application/json"))
    assert "\\ud800" in refused["detail"]
