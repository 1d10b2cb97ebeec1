"""Fixtures that several annotate test files use: an exported snapshot (with and without agent
metadata), and the requests the labeling short path hands over to the DRF views."""

import pytest

from annotate import api
from annotate.models import Task, Trajectory
from annotate.services.datasets import snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
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
    """The same snapshot's trajectories given a system prompt and tools, except the third comparison's."""
    third = snapshot.pairs.order_by("comparison_id")[2].comparison
    bare = {third.trajectory_a_id, third.trajectory_b_id}
    for t in Trajectory.objects.all():
        if t.pk not in bare:
            t.metadata = {**t.metadata, "system_prompt": SYSTEM_PROMPT, "tools": TOOLS}
            t.save(update_fields=["metadata"])
    return snapshot


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
