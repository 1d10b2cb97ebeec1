"""Trace files as their tools write them: one JSON document (a pretty-printed OTLP request, a
Langfuse or LangSmith JSON array) imports exactly as the same records written a line each
(fixtures/README.md names each file's source)."""

import io
import json
from pathlib import Path

import pytest

from annotate.input_records import records
from annotate.models import Trajectory
from annotate.services.imports import trajectories_import_stream
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
PAIRS = [
    ("otel/request.otlp.json", "otel/agents.otlp.jsonl"),
    ("openinference/request.otlp.json", "openinference/otlp.jsonl"),
    ("langsmith/export.json", "langsmith/agents.jsonl"),
    ("langfuse/export.json", "langfuse/agents.jsonl"),
]


def _stored() -> set[tuple]:
    return set(Trajectory.objects.values_list("content_hash", "answer"))


@pytest.mark.parametrize("document,lines", PAIRS)
def test_a_document_imports_as_its_lines_do(document, lines):
    with (FIXTURES / document).open("rb") as stream:
        report = trajectories_import_stream(stream=stream)
    assert report.layout == "document" and report.created > 0
    from_document = _stored()
    Trajectory.objects.all().delete()
    with (FIXTURES / lines).open("rb") as stream:
        again = trajectories_import_stream(stream=stream)
    assert again.layout == "jsonl"
    assert _stored() == from_document and again.created == report.created
    assert again.dropped == report.dropped


def test_the_upload_api_reads_a_document(admin_api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    body = (FIXTURES / "langfuse/export.json").read_bytes()
    response = admin_api.post("/api/v1/imports/", {"file": SimpleUploadedFile("export.json", body)}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["created_count"] > 0


def test_records_split_an_otlp_request_and_keep_jsonl_as_lines():
    doc = json.dumps({"resourceSpans": [{"a": 1}, {"b": 2}]}, indent=2).encode()
    layout, numbered = records(io.BytesIO(doc))
    assert layout == "document"
    assert [json.loads(text) for _, text in numbered] == [{"resourceSpans": [{"a": 1}]}, {"resourceSpans": [{"b": 2}]}]
    layout, numbered = records(io.BytesIO(b'{"a": 1}\n{"b": 2}\n'))
    assert layout == "jsonl" and [n for n, _ in numbered] == [1, 2]
    layout, _ = records(io.BytesIO(b"{x\n[]\n"))  # a broken first line is a broken JSONL line
    assert layout == "jsonl"
    layout, numbered = records(io.BytesIO(b'{\n "data": [{"id": 1}, {"id": 2}]\n}'))  # an API page
    assert [json.loads(t) for _, t in numbered] == [{"id": 1}, {"id": 2}]


@pytest.mark.parametrize(
    "text, reason",
    [
        (b'[\n{"id": 1},\n{"id": NaN}\n]', "the JSON document is not valid"),
        (b'[\n{"id": "\\ud800"}\n]', "1 bad record"),  # read by ijson, refused by the strict decoder
        (b'{\n "resourceSpans": [\n', "the JSON document is not valid"),
    ],
)
def test_a_broken_document_is_refused_and_nothing_is_stored(text, reason):
    with pytest.raises(ArbiterError, match=reason):
        trajectories_import_stream(stream=io.BytesIO(text))
    assert not Trajectory.objects.exists()


def test_a_line_over_the_limit_is_refused_without_being_held(settings):
    """The line is skipped to its end in blocks (never read whole) and named by number."""
    from tests.samples import canonical, jsonl

    settings.IMPORT_MAX_LINE_BYTES = 1000
    data = jsonl(canonical()) + b'{"x": "' + b"y" * 50_000 + b'"}\n' + jsonl(canonical(n=2))
    with pytest.raises(ArbiterError) as caught:
        trajectories_import_stream(stream=io.BytesIO(data))
    assert [(d["line"], "over 1,000 bytes" in d["error"]) for d in caught.value.details] == [(2, True)]
    assert not Trajectory.objects.exists()
    layout, numbered = records(io.BytesIO(b"a" * 5000 + b"\n" + b"b\n"), max_line=100)
    got = list(numbered)
    assert type(got[0][1]).__name__ == "TooLong" and got[1] == (2, b"b\n")
