"""Trace exports through the real import (command, upload, API): detection, grouping on disk,
all or nothing with the line and trace named, what was dropped reported, traces without an
agent run counted."""

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotate.models import ImportBatch, Trajectory
from annotate.services.imports import trajectories_import_stream
from tests.samples import canonical, jsonl
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "fixtures"
# (fixture, trajectories it holds): one per agent run, sub-agents included.
EXPORTS = [
    ("otel/agents.otlp.jsonl", 4),
    ("otel/deprecated_events.spans.jsonl", 1),
    ("openinference/otlp.jsonl", None),
    ("openinference/spans.jsonl", None),
    ("openinference/phoenix_dataframe.jsonl", None),
    ("langsmith/agents.jsonl", 3),
    ("langfuse/agents.jsonl", 4),
]


def _import(path: Path, format: str = "auto"):
    with path.open("rb") as stream:
        return trajectories_import_stream(stream=stream, format=format)


@pytest.mark.parametrize("name, expected", EXPORTS)
def test_each_export_is_detected_and_imported(name, expected):
    report = _import(FIXTURES / name)
    assert report.created == Trajectory.objects.count() > 0
    if expected is not None:
        assert report.created == expected
    stored = Trajectory.objects.first()
    assert stored.metadata["source_format"] in ("otel", "openinference", "langsmith", "langfuse")
    assert stored.steps and stored.task.prompt
    again = _import(FIXTURES / name)  # stored once
    assert (again.created, again.duplicates) == (0, report.created)


def test_a_named_format_reads_the_file_as_that_format():
    assert _import(FIXTURES / "langsmith/agents.jsonl", "langsmith").created == 3
    with pytest.raises(ArbiterError) as refused:
        _import(FIXTURES / "langfuse/agents.jsonl", "langsmith")
    assert refused.value.details and Trajectory.objects.count() == 3


def test_what_was_dropped_is_reported_by_the_command():
    out = io.StringIO()
    call_command("import_trajectories", str(FIXTURES / "langfuse/agents.jsonl"), stdout=out)
    text = out.getvalue()
    assert "Imported 4 trajectories" in text
    assert "Dropped on purpose:" in text and "1 EVENT observation(s) were dropped" in text
    assert "1 trace score(s) were dropped" in text


def test_a_bad_trace_refuses_the_whole_file_naming_its_first_line_and_trace(tmp_path):
    good = (FIXTURES / "langsmith/agents.jsonl").read_text().splitlines()
    broken = json.loads(good[0])
    broken["run_type"] = "mystery"
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([*good, json.dumps(broken)]) + "\n")
    with pytest.raises(CommandError):
        call_command("import_trajectories", str(path), stderr=io.StringIO())
    with pytest.raises(ArbiterError) as refused:
        _import(path)
    [detail] = refused.value.details
    # Reported at the trace's first line, naming the trace and the run's own line.
    assert detail["line"] == 1 and detail["error"].startswith(f"trace {broken['trace_id']!r}: ")
    assert f"(line {len(good) + 1}): run_type 'mystery' is unknown" in detail["error"]
    assert Trajectory.objects.count() == 0


def test_a_transcript_line_inside_a_trace_export_is_refused_with_its_line(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes((FIXTURES / "langsmith/agents.jsonl").read_bytes() + jsonl(canonical(n=0)))
    with pytest.raises(ArbiterError) as refused:
        _import(path)
    lines = len(path.read_text().splitlines())
    assert [d["line"] for d in refused.value.details] == [lines]
    assert Trajectory.objects.count() == 0


def _kv(key, value):
    return {"key": key, "value": {"stringValue": value}}


def test_traces_without_an_agent_run_are_counted_not_stored(tmp_path):
    web = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "77" * 16,
                                "spanId": "11" * 8,
                                "name": "GET /health",
                                "startTimeUnixNano": "1",
                                "attributes": [_kv("http.route", "/health")],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    path = tmp_path / "otlp.jsonl"
    path.write_text((FIXTURES / "otel/agents.otlp.jsonl").read_text() + json.dumps(web) + "\n")
    report = _import(path)
    assert report.created == 4 and report.dropped["trace_without_agent_run"] == 1
    assert "1 trace(s) held no agent run" in report.dropped_note()
    path.write_text(json.dumps(web) + "\n")
    with pytest.raises(ArbiterError, match="holds no trajectories.*held no agent run"):
        _import(path)


def test_upload_page_api_and_json_api_take_trace_formats(client, admin_user, tmp_path):
    client.force_login(admin_user)
    data = (FIXTURES / "otel/agents.otlp.jsonl").read_bytes()
    response = client.post("/annotate/imports/", {"file": SimpleUploadedFile("spans.jsonl", data), "format": "otel"})
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert (batch.status, batch.format, batch.created_count) == ("succeeded", "otel", 4)
    assert "Dropped on purpose" in batch.message

    runs = [json.loads(line) for line in (FIXTURES / "langsmith/agents.jsonl").read_text().splitlines()]
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    response = api.post("/api/v1/trajectories/?format=langsmith", runs, format="json")
    assert response.status_code == 201, response.json()
    assert len(response.json()["trajectory_ids"]) == 3 and response.json()["dropped"]["embedding_run"] == 1
    upload = SimpleUploadedFile("lf.jsonl", (FIXTURES / "langfuse/agents.jsonl").read_bytes())
    response = api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 201 and response.json()["created_count"] == 4


def test_the_json_api_reads_objects_never_text_in_them(admin_user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    line = (FIXTURES / "langsmith/agents.jsonl").read_text().splitlines()[0]
    for fmt in ("auto", "langsmith"):
        response = api.post(f"/api/v1/trajectories/?format={fmt}", [line], format="json")
        assert response.status_code == 400, response.json()
        assert "expected a JSON object, got str" in json.dumps(response.json())
    assert Trajectory.objects.count() == 0
