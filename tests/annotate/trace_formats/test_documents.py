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


# Issue 53: a refusal names the record AND the line of the file where it starts. A Langfuse export
# is a pretty-printed JSON array (its "Export" writes JSON.stringify(rows, null, 2)), so record 2 of
# a file starts far below line 2.


def _item_lines(text: str, indent: str) -> list[int]:
    """The line (from 1) where each item of a pretty-printed array starts: an oracle read off the
    text, independent of the reader."""
    return [number for number, line in enumerate(text.splitlines(), start=1) if line == indent + "{"]


def _refusal(data: bytes, **options) -> ArbiterError:
    with pytest.raises(ArbiterError) as caught:
        trajectories_import_stream(stream=io.BytesIO(data), **options)
    assert not Trajectory.objects.exists()
    return caught.value


def test_a_langfuse_export_refusal_names_the_record_and_its_real_line():
    rows = json.loads((FIXTURES / "langfuse/export.json").read_text())
    bad = next(i for i, row in enumerate(rows) if row.get("type") == "TOOL" and i > 2)
    rows[bad]["type"] = "WORKFLOW"  # not a Langfuse observation type
    text = json.dumps(rows, indent=2)
    line = _item_lines(text, "  ")[bad]
    assert line > 100  # far from the record's number: the old message said "line 5" for line ~200
    refused = _refusal(text.encode(), format="langfuse")
    (detail,) = refused.details
    message = detail["error"]
    assert f"record {bad + 1}, line {line}): type 'WORKFLOW' is not a Langfuse observation type" in message, message
    assert f"line {bad + 1})" not in message and f"line {bad + 1}:" not in message
    # The trace is refused where its first record starts, which the detail names as both.
    trace = rows[bad]["traceId"]
    first = next(i for i, row in enumerate(rows) if row.get("traceId", row["id"]) == trace)
    assert (detail["record"], detail["line"]) == (first + 1, _item_lines(text, "  ")[first])
    assert "each with the line it starts on" in refused.message
    # The same records a line each (JSONL): the line is the record's number, and says so alone.
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    (detail,) = _refusal(data, format="langfuse").details
    assert f"line {bad + 1}): type 'WORKFLOW'" in detail["error"] and "record" not in detail["error"]
    assert "record" not in detail and detail["line"] == first + 1


def test_every_reader_names_a_documents_record_by_its_line():
    """The other readers of a JSON document: a canonical trajectory list, a LangSmith export and
    a pretty-printed OTLP request (each resource span a record)."""
    from tests.samples import canonical

    trajectories = [canonical(n=1), canonical(n=2), canonical(n=3)]
    del trajectories[2]["steps"]
    text = json.dumps(trajectories, indent=2)
    (detail,) = _refusal(text.encode()).details
    assert (detail["record"], detail["line"]) == (3, _item_lines(text, "  ")[2])

    runs = json.loads((FIXTURES / "langsmith/export.json").read_text())
    runs[3] = "not a run"
    text = json.dumps(runs, indent=2)
    starts = [n for n, line in enumerate(text.splitlines(), start=1) if line[:3] in ("  {", '  "')]
    details = _refusal(text.encode(), format="langsmith").details  # and its trace, now missing a parent
    assert details[0] == {"record": 4, "line": starts[3], "error": "expected a JSON object, got str"}

    request = json.loads((FIXTURES / "otel/request.otlp.json").read_text())
    request["resourceSpans"].append("not a resource span")
    text = json.dumps(request, indent=2)
    spans_at = [n for n, line in enumerate(text.splitlines(), start=1) if line[:5] in ("    {", '    "')]
    position = len(request["resourceSpans"])
    details = _refusal(text.encode(), format="otel").details
    assert details[0] == {"record": position, "line": spans_at[-1], "error": details[0]["error"]}, details


@pytest.mark.parametrize("long_line", [16, 1 << 20])  # 16: lines held back are read by the exact scan
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_record_lines_hold_across_reads_strings_and_layouts(chunk, long_line, monkeypatch):
    """Brackets, commas, quotes and backslashes inside strings are not structure; a record's line
    is right whatever size the reads come in, and whichever scan reads it."""
    monkeypatch.setattr("annotate.input_records._LONG_LINE", long_line)

    class Reads(io.BytesIO):
        def read(self, size=-1):
            return super().read(min(size, chunk) if size and size > 0 else size)

    items = [{"id": i, "text": 'a "[{,}]" \\ \\"', "more": [[], {}, [1, {"x": "]"}]]} for i in range(4)]
    for document, indent in ((items, "  "), ({"data": items, "page": {"next": [1, 2]}}, "    ")):
        text = "\n\n" + json.dumps(document, indent=2)
        layout, numbered = records(Reads(text.encode()))
        got = [(int(position), position.line) for position, _ in numbered]
        assert layout == "document" and got == list(enumerate(_item_lines(text, indent), start=1))
    layout, numbered = records(Reads(b'\n{\n  "id": 1,\n  "x": ["a"]\n}\n'))  # one object: one record
    assert [(int(p), p.line) for p, _ in numbered] == [(1, 2)]
    minified = b"[\n" + json.dumps(items).encode()[1:]  # a first line, then every record on line 2
    layout, numbered = records(Reads(minified))
    assert [(int(p), p.line) for p, _ in numbered] == [(n, 2) for n in range(1, 5)]


def test_the_command_and_the_import_page_name_the_record_and_the_line(tmp_path, client, admin_user):
    from django.core.management import CommandError, call_command

    from annotate.input_records import error_place
    from annotate.models import ImportBatch

    rows = json.loads((FIXTURES / "langfuse/export.json").read_text())
    rows[1] = ["not", "a", "record"]
    text = json.dumps(rows, indent=2)
    path = tmp_path / "export.json"
    path.write_text(text)
    line = _item_lines(text, "  ")[0] + len(json.dumps(rows[0], indent=2).splitlines())  # where rows[1] opens
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_trajectories", str(path), "--format", "langfuse", stderr=err)
    assert f"record 2, line {line}: " in err.getvalue()
    batch = ImportBatch.objects.create(
        filename="export.json", size_bytes=len(text), errors=[{"record": 2, "line": line, "error": "bad"}]
    )
    assert error_place({"unit": "record", "line": 2}) == "record 2"  # stored before lines were known
    client.force_login(admin_user)
    assert f"record 2, line {line}" in client.get(f"/annotate/imports/{batch.pk}/").content.decode()
