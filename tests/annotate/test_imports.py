"""Trajectory import: both formats, dedupe, and all-or-nothing on bad input (PostgreSQL)."""

import io
import json

import pytest

from annotate.models import Comparison, Policy, Task, Trajectory
from annotate.services.imports import trajectories_import_objects, trajectories_import_stream
from tests.factories import CampaignFactory
from tests.helpers import at_the_same_moment
from tests.samples import canonical, chat_parallel, jsonl
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def _counts():
    return (Task.objects.count(), Policy.objects.count(), Trajectory.objects.count(), Comparison.objects.count())


def test_import_both_formats_from_jsonl():
    report = trajectories_import_stream(stream=io.BytesIO(jsonl(canonical(), chat_parallel())))
    assert (report.created, report.duplicates, report.lines_read) == (2, 0, 2)
    chat = Trajectory.objects.get(policy__name="chat-agent")
    assert chat.task.external_id == "chat-1"
    assert chat.task.prompt == "Where was Tamsin Quell born?"
    assert [s.get("call_id") for s in chat.steps if s["kind"] == "action"] == ["call_1", "call_2"]
    assert chat.answer == "Drevholm"
    assert chat.source == Trajectory.Source.IMPORTED
    assert chat.num_steps == 6


def test_identical_trajectories_are_stored_once_within_and_across_imports():
    report = trajectories_import_stream(stream=io.BytesIO(jsonl(canonical(), canonical(), canonical(n=1))))
    assert (report.created, report.duplicates) == (2, 1)
    again = trajectories_import_stream(stream=io.BytesIO(jsonl(canonical())))
    assert (again.created, again.duplicates) == (0, 1)
    assert Trajectory.objects.count() == 2


def test_blank_lines_are_skipped_but_counted_in_line_numbers():
    data = jsonl(canonical()) + b"\n\n" + b"{broken\n"
    with pytest.raises(ArbiterError) as info:
        trajectories_import_stream(stream=io.BytesIO(data))
    assert info.value.details == [{"line": 4, "error": info.value.details[0]["error"]}]


def test_campaign_gets_comparisons_of_the_imported_tasks():
    campaign = CampaignFactory()
    report = trajectories_import_stream(
        stream=io.BytesIO(jsonl(canonical(n=0), canonical(n=1), canonical(n=2), chat_parallel())),
        campaign=campaign,
    )
    assert report.comparisons_created == 3  # three trajectories of t1 give three pairs
    assert set(Comparison.objects.values_list("task__external_id", flat=True)) == {"t1"}


BAD_LINES = {
    "invalid JSON": b"{nope",
    "unknown schema version": json.dumps({**canonical(), "schema": "arbiter.trajectory/v0"}).encode(),
    "missing task": json.dumps({k: v for k, v in canonical().items() if k != "task"}).encode(),
    "missing steps": json.dumps({k: v for k, v in canonical().items() if k != "steps"}).encode(),
    "wrong types": json.dumps({**canonical(), "steps": "three steps"}).encode(),
    "step of unknown kind": json.dumps({**canonical(), "steps": [{"kind": "teleport"}]}).encode(),
    "text over the size limit": json.dumps(canonical(answer="x" * 100_001)).encode(),
    "not UTF-8": b'{"schema": "arbiter.trajectory/v1", "task": {"prompt": "caf\xe9"}}',
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_single_bad_line_imports_nothing_and_names_the_line(case):
    before = _counts()
    data = jsonl(canonical(n=0), canonical(n=1)) + BAD_LINES[case] + b"\n" + jsonl(canonical(n=2))
    with pytest.raises(ArbiterError) as info:
        trajectories_import_stream(stream=io.BytesIO(data), campaign=CampaignFactory())
    assert [d["line"] for d in info.value.details] == [3]
    assert "Nothing was imported" in info.value.message
    assert _counts() == before


def test_every_bad_line_is_reported():
    data = b"{x\n" + jsonl(canonical()) + b"[]\n" + b'{"schema": "v2"}\n'
    with pytest.raises(ArbiterError) as info:
        trajectories_import_stream(stream=io.BytesIO(data))
    assert [d["line"] for d in info.value.details] == [1, 3, 4]
    assert Trajectory.objects.count() == 0


def test_same_task_id_with_a_different_prompt_is_refused():
    trajectories_import_stream(stream=io.BytesIO(jsonl(canonical())))
    before = _counts()
    with pytest.raises(ArbiterError) as info:
        trajectories_import_stream(stream=io.BytesIO(jsonl(canonical(n=5, prompt="Another question?"))))
    assert "already exists with a different prompt" in info.value.details[0]["error"]
    assert _counts() == before


def test_an_empty_file_is_refused():
    with pytest.raises(ArbiterError, match="holds no trajectories"):
        trajectories_import_stream(stream=io.BytesIO(b"\n\n"))


def test_object_import_returns_ids_in_input_order_including_duplicates():
    first = trajectories_import_objects(objects=[canonical(n=0)])
    report = trajectories_import_objects(objects=[canonical(n=1), canonical(n=0)])
    assert report.created == 1 and report.duplicates == 1
    assert report.trajectory_ids[1] == first.trajectory_ids[0]


def test_imported_text_is_stored_exactly_as_given():
    payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    trajectories_import_objects(objects=[canonical(answer=payload)])
    assert Trajectory.objects.get().answer == payload


@pytest.mark.django_db(transaction=True)
def test_two_imports_of_the_same_file_at_the_same_moment_store_each_trajectory_once():
    """Issue 56: the rows go in by COPY and INSERT ... ON CONFLICT DO NOTHING. Two clients
    importing one file at once: the second waits on the first's rows, stores none of them
    twice, and counts them as duplicates; between them every line is counted exactly once."""
    data = jsonl(*(canonical(n=i) for i in range(1, 6)))
    reports, errors = at_the_same_moment(lambda: trajectories_import_stream(stream=io.BytesIO(data)))
    assert errors == []
    assert sorted((r.created, r.duplicates) for r in reports) == [(0, 5), (5, 0)]
    assert Trajectory.objects.count() == 5
    stored = Trajectory.objects.order_by("id").first()
    assert (stored.source, stored.metadata, stored.num_steps) == (Trajectory.Source.IMPORTED, {}, 4)
    assert Trajectory.objects.filter(outcome__isnull=True).count() == 5  # no outcome: SQL NULL, as the ORM stores it
