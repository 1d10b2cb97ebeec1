"""A record whose parent is in no record of the file is a broken export: the file is refused,
naming the trace and the record, unless partial traces are asked for; then the trace is
imported and its trajectories are marked partial (never invented as complete)."""

import io
import json
from pathlib import Path

import pytest

from annotate.models import ImportBatch, Trajectory
from annotate.services.imports import trajectories_import_stream
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
# file, how a record names itself and its parent
FILES = {
    "otel/deprecated_events.spans.jsonl": (lambda r: r["context"]["span_id"], lambda r: r.get("parent_id")),
    "openinference/spans.jsonl": (lambda r: r["context"]["span_id"], lambda r: r.get("parent_id")),
    "langsmith/agents.jsonl": (lambda r: r["id"], lambda r: r.get("parent_run_id")),
    "langfuse/agents.jsonl": (lambda r: r.get("id"), lambda r: r.get("parentObservationId")),
}


def _without_a_parent(name: str) -> tuple[bytes, str]:
    """The file with one record removed that another record names as its parent."""
    own, parent = FILES[name]
    records = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]
    parents = {parent(r) for r in records if parent(r)}
    gone = next(i for i, r in enumerate(records) if own(r) in parents)
    kept = [json.dumps(r) for i, r in enumerate(records) if i != gone]
    return "\n".join(kept).encode(), own(records[gone]).removeprefix("0x")  # span ids are read without 0x


@pytest.mark.parametrize("name", FILES)
def test_a_missing_parent_refuses_the_file_naming_trace_and_record(name):
    data, missing = _without_a_parent(name)
    with pytest.raises(ArbiterError) as caught:
        trajectories_import_stream(stream=io.BytesIO(data))
    reasons = " ".join(d["error"] for d in caught.value.details)
    assert f"names the parent {missing!r}, which no record of the file holds" in reasons
    assert "trace " in reasons and not Trajectory.objects.exists()


@pytest.mark.parametrize("name", FILES)
def test_partial_traces_on_request_are_imported_and_marked(name):
    data, missing = _without_a_parent(name)
    report = trajectories_import_stream(stream=io.BytesIO(data), partial_traces=True)
    assert report.dropped.get("partial_trace", 0) >= 1
    marked = [t for t in Trajectory.objects.all() if "partial_trace" in t.metadata]
    assert marked and all(missing in t.metadata["partial_trace"]["missing_parents"] for t in marked)
    assert len(marked) == report.dropped["partial_trace"]


def test_the_upload_api_takes_partial_traces_and_reports_dropped_as_a_field(admin_api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data, _ = _without_a_parent("langsmith/agents.jsonl")
    refused = admin_api.post("/api/v1/imports/", {"file": SimpleUploadedFile("runs.jsonl", data)}, format="multipart")
    assert refused.status_code == 400 and "which no record of the file holds" in json.dumps(refused.json())
    taken = admin_api.post(
        "/api/v1/imports/",
        {"file": SimpleUploadedFile("runs.jsonl", data), "partial_traces": "true"},
        format="multipart",
    )
    assert taken.status_code == 201, taken.content
    body = taken.json()
    assert body["partial_traces"] is True and body["dropped"]["partial_trace"] >= 1
    assert ImportBatch.objects.get(pk=body["id"]).dropped == body["dropped"]


def test_an_orphaned_langsmith_tool_run_is_passed_over_and_counted_never_a_trajectory():
    """Issue 45: a partial export whose tool run lost its agent run (and model calls) is no
    episode: its inputs are a tool's arguments, not a task. The tool run is passed over, counted
    with the reason; the trace's agent runs that are whole are imported as before."""
    name = "langsmith/agents.jsonl"
    records = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]
    tool = next(r for r in records if r["run_type"] == "tool")
    # Keep the tool run and drop every run above it: its agent, and the model calls beside it.
    above = set()
    parent = tool.get("parent_run_id")
    by_id = {r["id"]: r for r in records}
    while parent:
        above.add(parent)
        parent = by_id[parent].get("parent_run_id")
    siblings = {r["id"] for r in records if r.get("parent_run_id") in above and r["id"] != tool["id"]}
    kept = [r for r in records if r["id"] not in above | siblings and r.get("parent_run_id") not in siblings]
    whole = len([r for r in kept if not r.get("parent_run_id")])
    data = "\n".join(json.dumps(r) for r in kept).encode()
    report = trajectories_import_stream(stream=io.BytesIO(data), partial_traces=True)
    assert report.dropped["run_without_agent"] >= 1
    prompts = list(Trajectory.objects.values_list("task__prompt", flat=True))
    arguments = json.dumps(tool["inputs"])
    assert all(arguments not in p and p != tool["inputs"].get("input") for p in prompts), prompts
    assert Trajectory.objects.count() == whole
    assert "no task or agent to file them under" in report.dropped_note()
