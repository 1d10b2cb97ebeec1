"""Anthropic Messages transcripts: mapping, refusals, format detection, and `format` on every way in."""

import copy
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotate.models import ImportBatch, Trajectory
from annotate.services.imports import trajectories_import_stream
from annotate.trace_formats.reading import IMPORT_FORMATS
from annotate.trajectory_formats import TrajectoryFormatError, detect_format, parse_trajectory
from tests.samples import canonical, chat_parallel, jsonl
from webapp.errors import ArbiterError

TOOLS = [
    {
        "name": "search",
        "description": "Search the encyclopedia.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
    {
        "name": "open_page",
        "description": "Open an article by title.",
        "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    },
]


def research_agent(task_id="anth-1"):
    """Claude-style research run: thinking, parallel searches (one fails), a page, the answer."""
    return {
        "model": "claude-research-agent",
        "system": [
            {"type": "text", "text": "You are a careful research agent."},
            {"type": "text", "text": "Cite what you read.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": TOOLS,
        "task": {"external_id": task_id, "split": "dev"},
        "messages": [
            {"role": "user", "content": "Where was Tamsin Quell born?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two angles: the person and the birthplace.", "signature": "c2ln"},
                    {"type": "text", "text": "I will search both ways at once."},
                    {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"query": "Tamsin Quell"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "search", "input": {"query": "Quell birthplace"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": [{"type": "text", "text": "[0] Tamsin Quell (composer)"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "content": "search backend timed out",
                        "is_error": True,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
                    {"type": "tool_use", "id": "toolu_03", "name": "open_page", "input": {"title": "Tamsin Quell"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_03", "content": "Tamsin Quell was born in Drevholm."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "The article says Drevholm.", "signature": "c2ln"},
                    {"type": "text", "text": "Drevholm."},
                ],
            },
        ],
        "outcome": {"correct": True},
    }


def coding_agent(task_id="anth-2"):
    """A second agent: string system prompt, a user follow-up, a tool result with no content."""
    return {
        "system": "You fix failing tests.",
        "agent": {"name": "claude-coder", "version": "7"},
        "task": {"external_id": task_id},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Make test_add pass."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_a", "name": "run_tests", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a"},
                    {"type": "text", "text": "Also keep the docstring."},
                ],
            },
            {"role": "assistant", "content": "Fixed; the docstring is kept."},
        ],
    }


def silent_drop_case():
    """The transcript that used to pass as OpenAI chat with its tool call and result lost."""
    return {
        "agent": {"name": "claude-agent"},
        "messages": [
            {"role": "user", "content": "What is 6 times 7?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me compute."},
                    {"type": "tool_use", "id": "toolu_x", "name": "calc", "input": {"expr": "6*7"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "42"}]},
            {"role": "assistant", "content": "42"},
        ],
    }


# Mapping (no database)


def test_research_agent_maps_onto_canonical_steps_in_order():
    parsed = parse_trajectory(research_agent())
    steps = [(s["kind"], s.get("tool"), s.get("call_id")) for s in parsed.steps]
    assert steps == [
        ("thought", None, None),
        ("thought", None, None),
        ("action", "search", "toolu_01"),
        ("action", "search", "toolu_02"),
        ("observation", "search", "toolu_01"),
        ("observation", "search", "toolu_02"),
        ("action", "open_page", "toolu_03"),
        ("observation", "open_page", "toolu_03"),
        ("thought", None, None),
        ("answer", None, None),
    ]
    assert parsed.steps[0]["text"] == "Two angles: the person and the birthplace."
    assert parsed.steps[1]["text"] == "I will search both ways at once."
    assert parsed.steps[3]["arguments"] == {"query": "Quell birthplace"}
    assert parsed.steps[4]["content"] == "[0] Tamsin Quell (composer)" and "is_error" not in parsed.steps[4]
    assert parsed.steps[5] == {
        "kind": "observation",
        "tool": "search",
        "call_id": "toolu_02",
        "content": "search backend timed out",
        "is_error": True,
    }
    assert parsed.answer == "Drevholm."
    assert parsed.task == {"external_id": "anth-1", "split": "dev", "prompt": "Where was Tamsin Quell born?"}
    assert parsed.agent["name"] == "claude-research-agent"
    assert parsed.outcome == {"correct": True}
    assert parsed.metadata["system_prompt"] == "You are a careful research agent.\nCite what you read."
    assert parsed.metadata["tools"] == TOOLS
    assert parsed.metadata["dropped"] == {"redacted_thinking": 1}
    assert parsed.dropped == {"redacted_thinking": 1}


def test_second_agent_with_string_system_and_user_follow_up():
    parsed = parse_trajectory(coding_agent())
    assert [(s["kind"], s.get("tool")) for s in parsed.steps] == [
        ("action", "run_tests"),
        ("observation", "run_tests"),
        ("observation", "user"),
        ("answer", None),
    ]
    assert parsed.steps[0]["arguments"] == {}
    assert parsed.steps[1]["content"] == ""
    assert parsed.steps[2]["content"] == "Also keep the docstring."
    assert parsed.metadata == {"system_prompt": "You fix failing tests."}
    assert parsed.agent == {"name": "claude-coder", "version": "7"}
    assert parsed.dropped == {}


def test_parallel_results_in_another_order_stay_tied_to_their_calls():
    obj = research_agent()
    obj["messages"][2]["content"].reverse()
    parsed = parse_trajectory(obj)
    observations = [(s["call_id"], s["content"]) for s in parsed.steps if s["kind"] == "observation"]
    assert observations[:2] == [("toolu_02", "search backend timed out"), ("toolu_01", "[0] Tamsin Quell (composer)")]


def test_the_old_silent_drop_case_is_refused_as_openai_and_read_as_anthropic():
    with pytest.raises(TrajectoryFormatError) as info:
        parse_trajectory(silent_drop_case(), format="openai")
    assert str(info.value) == (
        "messages[1].content[1]: content block type 'tool_use' is not OpenAI chat; "
        "is this an Anthropic Messages transcript? use --format anthropic"
    )
    for fmt in ("auto", "anthropic"):
        parsed = parse_trajectory(silent_drop_case(), format=fmt)
        assert [s["kind"] for s in parsed.steps] == ["thought", "action", "observation", "answer"]
        assert parsed.steps[1] == {"kind": "action", "tool": "calc", "arguments": {"expr": "6*7"}, "call_id": "toolu_x"}
        assert parsed.steps[2]["content"] == "42"


def test_openai_refuses_a_tool_result_block_and_an_unknown_part_with_the_reason():
    obj = chat_parallel()
    obj["messages"][3]["content"] = [{"type": "tool_result", "tool_use_id": "x", "content": "y"}]
    with pytest.raises(TrajectoryFormatError, match="'tool_result' is not OpenAI chat.*--format anthropic"):
        parse_trajectory(obj, format="openai")
    obj = chat_parallel()
    obj["messages"][1]["content"] = [{"type": "image_url", "image_url": {"url": "x"}}]
    with pytest.raises(TrajectoryFormatError, match=r"messages\[1\].content\[0\]: content part of type 'image_url'"):
        parse_trajectory(obj)
    obj = chat_parallel()
    obj["messages"][2]["tool_calls"][0]["type"] = "custom"
    with pytest.raises(TrajectoryFormatError, match=r"tool_calls\[0\].type: tool call type 'custom'"):
        parse_trajectory(obj)


def _broken(change):
    obj = research_agent()
    change(obj)
    return obj


MALFORMED = {
    "unknown block": (
        lambda o: o["messages"][1]["content"].append({"type": "image", "source": {}}),
        r"messages\[1\].content\[4\]: content block type 'image' cannot be imported in a 'assistant' message",
    ),
    "tool_use in a user turn": (
        lambda o: o["messages"][2]["content"].append({"type": "tool_use", "id": "t", "name": "n", "input": {}}),
        r"messages\[2\].content\[2\]: content block type 'tool_use' cannot be imported in a 'user' message",
    ),
    "orphan tool_result": (
        lambda o: o["messages"][2]["content"][1].update(tool_use_id="toolu_99"),
        r"messages\[2\].content\[1\]: tool_result answers unknown tool_use_id 'toolu_99'",
    ),
    "result before its call": (
        lambda o: o["messages"].insert(
            1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "early"}]}
        ),
        "unknown tool_use_id 'toolu_01'",
    ),
    "input not an object": (
        lambda o: o["messages"][1]["content"][2].update(input="Tamsin Quell"),
        r"content\[2\].input: expected an object",
    ),
    "is_error not a boolean": (
        lambda o: o["messages"][2]["content"][1].update(is_error="yes"),
        r"content\[1\].is_error: expected true or false",
    ),
    "image inside a tool_result": (
        lambda o: o["messages"][2]["content"][0].update(content=[{"type": "image", "source": {}}]),
        r"content\[0\].content\[0\]: content block type 'image' cannot be imported here",
    ),
    "system role message": (
        lambda o: o["messages"].insert(0, {"role": "system", "content": "x"}),
        "unknown role 'system'.*top-level 'system'",
    ),
    "thinking not a string": (
        lambda o: o["messages"][1]["content"][0].update(thinking=["a"]),
        r"content\[0\].thinking: expected a string",
    ),
    "tool_use id used twice": (
        lambda o: o["messages"][3]["content"][1].update(id="toolu_01"),
        "tool_use id 'toolu_01' is used twice",
    ),
    "system as an object": (lambda o: o.update(system={"text": "x"}), "system: expected a string or a list"),
    "tools not a list": (lambda o: o.update(tools={"search": {}}), "tools: expected a list"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_anthropic_transcripts_are_refused_with_the_reason(case):
    change, reason = MALFORMED[case]
    with pytest.raises(TrajectoryFormatError, match=reason):
        parse_trajectory(_broken(change), format="anthropic")


# Detection


def test_detection_rule():
    assert tuple(ImportBatch.Format.values) == IMPORT_FORMATS  # the stored choice and the readers agree
    assert detect_format(canonical()) == "canonical"
    assert detect_format(chat_parallel()) == "openai"
    assert detect_format(research_agent()) == "anthropic"
    assert detect_format(coding_agent()) == "anthropic"  # a top-level system
    plain = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    assert detect_format(plain) == "openai"  # both read it the same way
    assert parse_trajectory(plain, format="anthropic").steps == parse_trajectory(plain).steps


def test_ambiguous_transcript_is_refused_naming_the_format_option():
    mixed = chat_parallel()
    mixed["messages"][4]["content"] = [{"type": "tool_result", "tool_use_id": "call_1", "content": "x"}]
    with pytest.raises(TrajectoryFormatError, match="ambiguous transcript.*--format openai or --format anthropic"):
        parse_trajectory(mixed)
    with_system = copy.deepcopy(chat_parallel())
    with_system["system"] = "top-level system"
    with pytest.raises(TrajectoryFormatError, match="ambiguous"):
        parse_trajectory(with_system)


def test_a_named_format_that_does_not_fit_is_refused():
    with pytest.raises(TrajectoryFormatError, match="unknown role 'system'"):
        parse_trajectory(chat_parallel(), format="anthropic")
    with pytest.raises(TrajectoryFormatError, match="needs 'schema'"):
        parse_trajectory(research_agent(), format="canonical")
    with pytest.raises(TrajectoryFormatError, match="marks a canonical trajectory, not Anthropic Messages"):
        parse_trajectory(canonical(), format="anthropic")


# Every way in (PostgreSQL)


@pytest.mark.django_db
def test_stream_import_keeps_line_numbers_and_is_all_or_nothing():
    broken = _broken(lambda o: o["messages"][2]["content"][1].update(tool_use_id="nope"))
    data = jsonl(research_agent(), canonical(), coding_agent(), broken)
    with pytest.raises(ArbiterError) as info:
        trajectories_import_stream(stream=io.BytesIO(data))
    assert [d["line"] for d in info.value.details] == [4]
    assert "unknown tool_use_id 'nope'" in info.value.details[0]["error"]
    assert Trajectory.objects.count() == 0
    report = trajectories_import_stream(stream=io.BytesIO(jsonl(research_agent(), canonical(), coding_agent())))
    assert (report.created, report.dropped) == (3, {"redacted_thinking": 1})
    stored = Trajectory.objects.get(policy__name="claude-research-agent")
    assert stored.num_steps == 10 and stored.answer == "Drevholm."
    assert stored.metadata["dropped"] == {"redacted_thinking": 1}


@pytest.mark.django_db
def test_command_takes_an_explicit_format(tmp_path):
    path = tmp_path / "claude.jsonl"
    path.write_bytes(jsonl(silent_drop_case()))
    err = io.StringIO()
    with pytest.raises(CommandError, match="Nothing was imported"):
        call_command("import_trajectories", str(path), "--format", "openai", stderr=err)
    assert "line 1: messages[1].content[1]: content block type 'tool_use' is not OpenAI chat" in err.getvalue()
    assert Trajectory.objects.count() == 0
    path.write_bytes(jsonl(research_agent()))
    out = io.StringIO()
    call_command("import_trajectories", str(path), "--format", "anthropic", stdout=out)
    assert "Imported 1 trajectories" in out.getvalue()
    assert "1 redacted_thinking block(s)" in out.getvalue()
    with pytest.raises(CommandError, match="invalid choice: 'claude'"):
        call_command("import_trajectories", str(path), "--format", "claude")


@pytest.mark.django_db
def test_upload_page_takes_a_format(client, admin_user):
    client.force_login(admin_user)
    page = client.get("/annotate/imports/").content.decode()
    assert 'name="format"' in page and "Anthropic Messages" in page
    upload = SimpleUploadedFile("claude.jsonl", jsonl(silent_drop_case()))
    response = client.post("/annotate/imports/", {"file": upload, "format": "openai"}, follow=True)
    assert "is not OpenAI chat; is this an Anthropic Messages transcript?" in response.content.decode()
    assert ImportBatch.objects.get().format == "openai"
    upload = SimpleUploadedFile("claude.jsonl", jsonl(research_agent()))
    response = client.post("/annotate/imports/", {"file": upload, "format": "anthropic"}, follow=True)
    page = response.content.decode()
    assert "Imported 1 trajectories" in page and "redacted_thinking" in page
    assert Trajectory.objects.get().steps[2]["call_id"] == "toolu_01"
    upload = SimpleUploadedFile("claude.jsonl", jsonl(research_agent()))
    assert client.post("/annotate/imports/", {"file": upload, "format": "claude"}).status_code == 400


@pytest.mark.django_db
def test_api_upload_and_post_take_a_format(admin_api):
    upload = SimpleUploadedFile("claude.jsonl", jsonl(silent_drop_case()))
    response = admin_api.post("/api/v1/imports/", {"file": upload, "format": "openai"}, format="multipart")
    assert response.status_code == 400
    assert "--format anthropic" in response.json()["errors"][0]["message"]
    assert response.json()["import"]["format"] == "openai"
    upload = SimpleUploadedFile("claude.jsonl", jsonl(silent_drop_case()))
    response = admin_api.post("/api/v1/imports/", {"file": upload, "format": "anthropic"}, format="multipart")
    assert response.status_code == 201 and response.json()["created_count"] == 1
    upload = SimpleUploadedFile("claude.jsonl", jsonl(silent_drop_case()))
    bad = admin_api.post("/api/v1/imports/", {"file": upload, "format": "claude"}, format="multipart")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "format"

    body = json.dumps([research_agent(), coding_agent()])
    refused = admin_api.post("/api/v1/trajectories/?format=openai", body, content_type="application/json")
    assert refused.status_code == 400
    assert [e["line"] for e in refused.json()["errors"]] == [1, 2]
    ok = admin_api.post("/api/v1/trajectories/?format=anthropic", body, content_type="application/json")
    assert ok.status_code == 201
    assert ok.json()["created"] == 2 and ok.json()["dropped"] == {"redacted_thinking": 1}
    unknown = admin_api.post("/api/v1/trajectories/?format=claude", body, content_type="application/json")
    assert unknown.status_code == 400 and unknown.json()["errors"][0]["field"] == "format"


@pytest.mark.django_db
def test_a_large_upload_keeps_its_format_for_the_job(settings):
    from annotate.services.imports import import_batch_run, import_upload_create

    settings.IMPORT_INLINE_MAX_BYTES = 0  # every upload goes to a job
    upload = SimpleUploadedFile("claude.jsonl", jsonl(silent_drop_case()))
    batch = import_upload_create(upload=upload, campaign=None, created_by=None, format="openai")
    assert batch.status == ImportBatch.Status.QUEUED
    import_batch_run(batch_id=batch.id)  # what the job runs
    batch.refresh_from_db()
    assert batch.status == ImportBatch.Status.FAILED
    assert "is not OpenAI chat" in batch.errors[0]["error"]
    upload = SimpleUploadedFile("claude.jsonl", jsonl(research_agent()))
    batch = import_upload_create(upload=upload, campaign=None, created_by=None, format="anthropic")
    import_batch_run(batch_id=batch.id)
    batch.refresh_from_db()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert "Dropped on purpose: 1 redacted_thinking block(s)" in batch.message
