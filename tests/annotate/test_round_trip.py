"""Round trip: a `trl` row's chosen and rejected conversations, imported back as OpenAI chat
transcripts, give the same steps, system prompt and tools, so data moves between Arbiter
instances without loss."""

import json

import pytest

from annotate.exports import export_file
from annotate.models import Trajectory
from annotate.services.datasets import snapshot_create
from annotate.services.imports import trajectories_import_objects
from annotate.trajectory_formats import parse_trajectory
from tests.annotate.dataset_fixtures import voted_campaign

pytestmark = pytest.mark.django_db

SYSTEM_PROMPT = "You are Quillwort. Cite what you open."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open",
            "description": "Open a result.",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
    },
]
# Everything the canonical schema has that a chat transcript must carry: thoughts in a row,
# parallel calls answered out of order, a failed tool, steps logged without call ids, a user
# turn, a thought right before the answer, quotes.
RICH = [
    {"kind": "thought", "text": "Search first."},
    {"kind": "thought", "text": "Two searches at once."},
    {"kind": "action", "tool": "search", "arguments": {"query": "Veloran"}, "call_id": "c1"},
    {"kind": "action", "tool": "open", "arguments": {"n": 0}, "call_id": "c2"},
    {"kind": "observation", "tool": "open", "content": "Error: nothing opened yet.", "call_id": "c2", "is_error": True},
    {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks", "call_id": "c1"},
    {"kind": "observation", "tool": "user", "content": "Please also give the year."},
    {"kind": "action", "tool": "open", "arguments": {"n": 0}},
    {"kind": "observation", "tool": "open", "content": "Founded in 1821 by Ilse Marrow."},
    {"kind": "action", "tool": "search", "arguments": "not json {"},
    {"kind": "observation", "tool": "search", "content": "no results"},
    {"kind": "thought", "text": "That settles it."},
    {"kind": "answer", "text": "Ilse Marrow, 1821", "quotes": ["Founded in 1821 by Ilse Marrow."]},
]
PLAIN = [
    {"kind": "action", "tool": "search", "arguments": {"query": "Veloran founder"}},
    {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks"},
    {"kind": "answer", "text": "I could not find it."},
]


@pytest.fixture
def exported_rows(tmp_path):
    campaign, comparisons = voted_campaign([[1, 1], [5, 5]])
    for comparison, (a_steps, b_steps) in zip(comparisons, [(RICH, PLAIN), (PLAIN, RICH)]):
        for trajectory, steps in ((comparison.trajectory_a, a_steps), (comparison.trajectory_b, b_steps)):
            trajectory.steps, trajectory.num_steps = steps, len(steps)
            trajectory.metadata = {"system_prompt": SYSTEM_PROMPT, "tools": TOOLS}
            trajectory.save()
    snapshot = snapshot_create(name="round trip", campaigns=[campaign], test_fraction=0.0, seed=1)
    path = tmp_path / "trl.jsonl"
    export_file(snapshot, "trl", path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 2
    return rows


def _transcripts(row: dict) -> dict[str, dict]:
    """The row's two conversations as OpenAI chat transcripts, as another instance would import them."""
    return {
        side: {"messages": row["prompt"] + row[side], "tools": json.loads(row["tools"])}
        for side in ("chosen", "rejected")
    }


def test_chosen_and_rejected_import_back_to_the_same_steps(exported_rows):
    for row in exported_rows:
        back = {side: parse_trajectory(t) for side, t in _transcripts(row).items()}
        assert back["chosen"].steps == RICH  # the preferred side in both comparisons
        assert back["rejected"].steps == PLAIN
        for parsed in back.values():
            assert parsed.metadata["system_prompt"] == SYSTEM_PROMPT
            assert parsed.metadata["tools"] == TOOLS
            assert parsed.task["prompt"] == row["prompt"][-1]["content"]
            assert parsed.answer == parsed.steps[-1]["text"]


def test_the_import_stores_them_with_the_same_steps(exported_rows):
    objects = [t for row in exported_rows for t in _transcripts(row).values()]
    report = trajectories_import_objects(objects=objects, format="auto")
    stored = Trajectory.objects.in_bulk(report.trajectory_ids)
    assert [stored[i].steps for i in report.trajectory_ids] == [RICH, PLAIN, RICH, PLAIN]
    assert report.created == 4  # a new agent name ("unknown") and task ids from the prompts: new rows
