"""Hostile input on every write route, as every role: a 4xx with a JSON error body, and nothing changed.

Each case here was once seen to give a 500 (or a wrong success). The database is compared
row for row (counts of every table) before and after each request.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotate.models import Campaign, Trajectory
from tests.conftest import token_client
from tests.helpers import RAW_BODIES, make_campaign
from tests.samples import canonical, jsonl

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ("admin", "researcher", "annotator", "anonymous")


def _nested(depth: int, leaf="x"):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _counts() -> dict[str, int]:
    """Rows of every data table; WorkerBeat is left out: a worker's liveness row, written by any
    worker of the test session on its own clock, not by a request."""
    return {
        m._meta.label: m.objects.count()
        for m in apps.get_models()
        if m._meta.app_label in ("annotate", "webapp", "training", "rewardmodel")
        and m._meta.label != "webapp.WorkerBeat"
    }


@pytest.fixture
def clients(transactional_db):
    from tests.factories import UserFactory

    out = {role: token_client(UserFactory(username=f"h-{role}", roles=[role])) for role in ROLES[:3]}
    out["anonymous"] = APIClient()
    return out


@pytest.fixture
def world(clients):
    """A campaign with leased assignments for the admin and the annotator, and a run to cancel."""
    from webapp.models import Run

    campaign = make_campaign(n_comparisons=3, k=2)
    leases = {}
    for role in ("admin", "annotator"):
        body = clients[role].get(f"/api/v1/assignments/next?campaign={campaign.id}").json()
        leases[role] = body["id"]
    run = Run.objects.create(kind="rollout", status="succeeded", config={})
    return {"campaign": campaign.id, "leases": leases, "run": run.id}


def _write_routes(world, role) -> list[str]:
    lease = world["leases"].get(role, world["leases"]["annotator"])
    return [
        "/api/v1/trajectories/",
        f"/api/v1/trajectories/?campaign={world['campaign']}",
        "/api/v1/datasets/",
        "/api/v1/runs/",
        f"/api/v1/assignments/{lease}/judgement",
        f"/api/v1/assignments/{lease}/skip",
        f"/api/v1/runs/{world['run']}/cancel",
        f"/api/v1/runs/{world['run']}/resume",
    ]


def _assert_refused(response, before):
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert _counts() == before


@pytest.mark.parametrize("role", ROLES)
def test_unstorable_json_bodies_are_refused_on_every_route(clients, world, role):
    client = clients[role]
    before = _counts()
    for route in _write_routes(world, role):
        for name, raw in RAW_BODIES.items():
            response = client.generic("POST", route, raw, content_type="application/json")
            try:
                _assert_refused(response, before)
            except AssertionError as exc:
                raise AssertionError(f"{role} POST {route} with {name}: {exc}") from None


def test_the_reasons_name_the_problem(clients):
    admin = clients["admin"]
    cases = {
        "[" * 1000 + "]" * 1000: "nested more than 64 levels",
        '{"x": NaN}': "NaN is not a number JSON allows",
        '{"x": 1e400}': "1e400 is too large",
        '{"x": "\\ud800"}': "lone UTF-16 surrogate",
        '{"x": "\\u0000"}': "NUL character",
        '{"x": "\x01"}': "invalid JSON at line 1, column 8: invalid control character",
    }
    for raw, reason in cases.items():
        detail = admin.generic("POST", "/api/v1/trajectories/", raw, content_type="application/json").json()["detail"]
        assert reason in detail, detail
        assert "at at" not in detail


def _trajectory(**changes):
    obj = canonical(n=0)
    obj.update(changes)
    return obj


FIELD_CASES = {
    "task as a string": _trajectory(task="x"),
    "metadata as a number": _trajectory(metadata=5),
    "metadata nested 100 deep": _trajectory(metadata=_nested(100)),
    "outcome nested 950 deep": None,  # built as text below: json.dumps itself would recurse too deep
    "steps as an object": _trajectory(steps={"kind": "thought"}),
    "an unknown step kind": _trajectory(steps=[{"kind": "dance"}]),
    "a legacy function_call": {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "function_call": {"name": "search", "arguments": "{}"}},
            {"role": "assistant", "content": "a"},
        ]
    },
}


# Accepted as Anthropic Messages when detected; refused with the reason when named OpenAI chat.
ANTHROPIC_TRANSCRIPT = {
    "messages": [
        {"role": "user", "content": "Who founded Veloran?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "tu1", "name": "search", "input": {"query": "Veloran"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "..."}]},
        {"role": "assistant", "content": "Ilse Marrow"},
    ]
}


def _deep_outcome_text() -> str:
    inner = '{"a":' * 950 + "1" + "}" * 950
    return json.dumps(canonical(n=0)).replace('"schema"', f'"outcome": {inner}, "schema"', 1)


def test_trajectory_fields_of_the_wrong_shape_are_refused_with_the_reason(clients):
    admin = clients["admin"]
    before = _counts()
    for name, obj in FIELD_CASES.items():
        raw = _deep_outcome_text() if obj is None else json.dumps(obj)
        response = admin.generic("POST", "/api/v1/trajectories/", raw, content_type="application/json")
        try:
            _assert_refused(response, before)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    as_openai = admin.post("/api/v1/trajectories/?format=openai", ANTHROPIC_TRANSCRIPT, format="json")
    _assert_refused(as_openai, before)
    assert "content block type 'tool_use' is not OpenAI chat" in as_openai.json()["errors"][0]["message"]


@pytest.mark.parametrize("value", [2**31, 2**32 + 5, 2**63, 2**64, -1])
def test_integers_out_of_their_columns_range_are_refused(clients, world, value):
    before = _counts()
    researcher, admin, annotator = clients["researcher"], clients["admin"], clients["annotator"]
    dataset = {"name": "d", "campaigns": [world["campaign"]], "seed": value}
    _assert_refused(researcher.post("/api/v1/datasets/", dataset, format="json"), before)
    _assert_refused(
        researcher.post("/api/v1/datasets/", {**dataset, "seed": 0, "campaigns": [value]}, format="json"), before
    )
    _assert_refused(
        researcher.post("/api/v1/datasets/", {**dataset, "seed": 0, "min_votes": value}, format="json"), before
    )
    judgement = {"choice": 2, "first_wrong_step_left": value}
    lease = world["leases"]["annotator"]
    _assert_refused(annotator.post(f"/api/v1/assignments/{lease}/judgement", judgement, format="json"), before)
    _assert_refused(annotator.post(f"/api/v1/assignments/{lease}/judgement", {"choice": value}, format="json"), before)
    if value > 2**53:
        run = {"kind": "rollout", "config": {"tasks": value}}
        _assert_refused(admin.post("/api/v1/runs/", run, format="json"), before)
    for query in (f"?campaign={value}", "?campaign=abc", "?campaign=1.5"):
        _assert_refused(admin.post(f"/api/v1/trajectories/{query}", canonical(), format="json"), before)
        _assert_refused(annotator.get(f"/api/v1/assignments/next{query}"), before)


def test_nan_and_surrogates_through_the_upload_and_the_command(clients, tmp_path):
    from django.core.management import CommandError, call_command

    def with_raw(n, key, raw):
        obj = canonical(n=n)
        obj["metadata"] = {key: "__RAW__"}
        return json.dumps(obj).replace('"__RAW__"', raw).encode()

    lines = [
        json.dumps(canonical(n=0)).encode(),
        with_raw(1, "score", "NaN"),
        with_raw(2, "note", '"\\ud800"'),
        with_raw(3, "x", "1e400"),
    ]
    assert b"NaN" in lines[1] and b"\\ud800" in lines[2] and b"1e400" in lines[3]
    body = b"\n".join(lines) + b"\n"
    before = _counts()
    response = clients["admin"].post(
        "/api/v1/imports/", {"file": SimpleUploadedFile("t.jsonl", body)}, format="multipart"
    )
    assert response.status_code == 400
    assert [e["line"] for e in response.json()["errors"]] == [2, 3, 4]
    assert Trajectory.objects.count() == 0

    path = tmp_path / "bad.jsonl"
    path.write_bytes(body)
    before = _counts()
    with pytest.raises(CommandError, match="3 bad line"):
        call_command("import_trajectories", str(path), "--campaign", "NEW")
    assert _counts() == before
    assert not Campaign.objects.filter(name="NEW").exists()


def test_api_answers_json_for_unknown_paths_wrong_ids_and_methods(clients):
    admin = clients["admin"]
    for path in (
        "/api/v1/nope",
        "/api/v1/runs/99999999999999999999999",
        "/api/v1/runs/abc",
        "/api/v1/datasets/-1",
        "/api/v1/imports/1/",
    ):
        response = admin.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"].startswith("application/json") and response.json()["detail"]
    response = admin.put("/api/v1/runs/", {}, format="json")
    assert response.status_code == 405 and response.json()["detail"]
    for query in ("?status=%00", "?kind=a%00b", "?status=nope", f"?kind={'k' * 40}"):  # found by the fuzzer
        response = admin.get(f"/api/v1/runs/{query}")
        assert response.status_code == 400 and response.json()["errors"][0]["field"] in ("kind", "status")
    response = APIClient().get("/api/v1/whoami")
    assert response.status_code in (401, 403) and response.json()["detail"]


def test_an_upload_declaring_more_than_the_limit_is_refused_before_it_is_read(clients, settings):
    settings.IMPORT_MAX_UPLOAD_BYTES = 1000
    admin = clients["admin"]
    before = _counts()
    body = jsonl(*[canonical(n=i) for i in range(20)])
    response = admin.post("/api/v1/imports/", {"file": SimpleUploadedFile("big.jsonl", body)}, format="multipart")
    assert response.status_code == 413 and "over the limit of 1,000 bytes" in response.json()["detail"]
    assert _counts() == before

    # A declared length of 600 MB with a tiny body: refused from the header, nothing is read.
    from django.core.exceptions import RequestDataTooBig
    from django.test import RequestFactory

    from webapp.uploads import UploadLimitHandler

    request = RequestFactory().post("/api/v1/imports/", {"file": SimpleUploadedFile("x.jsonl", b"{}")})
    with pytest.raises(RequestDataTooBig, match="600,000,000 bytes"):
        UploadLimitHandler(request).handle_raw_input(request, request.META, 600_000_000, b"x")


def test_the_same_import_sent_by_several_clients_at_once_stores_each_trajectory_once(clients):
    import threading

    from django.db import connection

    admin_user_token = clients["admin"]._credentials["HTTP_AUTHORIZATION"]
    campaign = Campaign.objects.create(name="race")
    body = [canonical(task_id=f"t{i}", n=i) for i in range(200)]
    results, barrier = [], threading.Barrier(6)

    def post():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=admin_user_token)
        barrier.wait()
        results.append(client.post(f"/api/v1/trajectories/?campaign={campaign.id}", body, format="json"))
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [201] * 6, [r.content[:200] for r in results]
    bodies = [r.json() for r in results]
    assert sum(b["created"] for b in bodies) == 200
    assert all(b["created"] + b["duplicates"] == 200 for b in bodies)
    assert all(b["trajectory_ids"] == bodies[0]["trajectory_ids"] for b in bodies)
    assert Trajectory.objects.count() == 200
