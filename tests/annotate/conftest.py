"""Fixtures that several annotate test files use: an exported snapshot (with and without agent
metadata), and the requests the labeling short path hands over to the DRF views."""

import pytest

from annotate import api
from annotate.models import SnapshotCorrection, Task, Trajectory
from annotate.services.corrections import CallIn, CorrectionIn, correction_create, correction_review
from annotate.services.datasets import snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from tests.factories import UserFactory
from tests.helpers import SYSTEM_PROMPT, TOOL_STEPS, TOOLS


@pytest.fixture
def snapshot():
    campaign, comparisons = voted_campaign(
        [[1, 2], [5, 4], [2, 2], [4, 5], [1, 1], [5, 5]] * 3, marks={0: (None, 2), 1: (1, None)}
    )
    first = comparisons[0].trajectory_a
    first.steps, first.num_steps = TOOL_STEPS, len(TOOL_STEPS)
    first.save()
    # Fixed task ids: the split hashes them, and factory sequence numbers shift as tests are added.
    # These put the first marked comparison in train and the second in test (5 test tasks of 18).
    for i, comparison in enumerate(comparisons):
        Task.objects.filter(pk=comparison.task_id).update(external_id=f"export-task-{i + 1}")
    snapshot = snapshot_create(name="prefs", campaigns=[campaign], test_fraction=0.3, seed=1)
    splits = dict(snapshot.pairs.values_list("comparison_id", "split"))
    assert (splits[comparisons[0].pk], splits[comparisons[1].pk]) == ("train", "test")
    return snapshot


@pytest.fixture
def agent_snapshot(snapshot):
    """The same snapshot's trajectories given a system prompt and tools, except the third
    comparison's; and an accepted correction of each of the first two comparisons (one in each
    split) frozen into it, for the `sft` and `dpo` exports."""
    pairs = list(snapshot.pairs.order_by("comparison_id").select_related("comparison"))
    third = pairs[2].comparison
    bare = {third.trajectory_a_id, third.trajectory_b_id}
    for t in Trajectory.objects.all():
        if t.pk not in bare:
            t.metadata = {**t.metadata, "system_prompt": SYSTEM_PROMPT, "tools": TOOLS}
            t.save(update_fields=["metadata"])
    author, reviewer = UserFactory(roles=["annotator"]), UserFactory(roles=["admin"])
    for pair, fix in zip(pairs[:2], (_tool_call_fix, _answer_fix)):
        original = Trajectory.objects.get(pk=pair.comparison.trajectory_a_id)
        correction, _ = correction_create(
            original=original, correction=fix(original), author=author, comparison=pair.comparison
        )
        correction_review(correction=correction, decision="accept", reviewer=reviewer)
        SnapshotCorrection.objects.create(snapshot=snapshot, correction=correction, split=pair.split)
    return snapshot


def _tool_call_fix(original) -> CorrectionIn:
    step = next(i for i, s in enumerate(original.steps) if s["kind"] == "action")
    return CorrectionIn(
        kind="tool_call",
        step=step,
        calls=[CallIn("search", {"query": "the right page"}, "Found: the right page.")],
        answer="the right answer",
    )


def _answer_fix(original) -> CorrectionIn:
    step = next((i for i, s in enumerate(original.steps) if s["kind"] == "answer"), len(original.steps))
    return CorrectionIn(kind="answer", step=step, answer="a better answer")


@pytest.fixture
def handed_over(monkeypatch):
    """The paths of the requests the short path handed to the DRF views."""
    calls = []
    for cls in (api.AssignmentNextApi, api.JudgementSubmitApi):

        def dispatch(self, request, *args, _original=cls.dispatch, **kwargs):
            calls.append(request.path)
            return _original(self, request, *args, **kwargs)

        monkeypatch.setattr(cls, "dispatch", dispatch)
    return calls
