"""Simulated corrections for `run_pipeline --compare-dpo` (issue 33): the fix a person following a
right demonstration makes, stored and replayed by the screen's own service, reviewed by the
replay's rubric outcome."""

import pytest

from annotate.models import Correction
from tests.factories import CampaignFactory
from tests.helpers import answer, call, seen
from training.simulated_corrections import campaign_simulate_corrections, correction_from_demonstration
from training.simulation import scripted_trajectories_generate

DEMO = [call("search", query="Veloran"), seen("search", "1. Veloran"), call("open", n=1), seen("open", "page")]


def test_the_fix_starts_where_the_episode_leaves_the_demonstration():
    wrong_call = [call("search", query="Veloran"), seen("search", "1."), call("open", n=2), seen("open", "x")]
    fix = correction_from_demonstration(wrong_call + [answer("Nobody")], DEMO + [answer("Ilse")], "Ilse")
    assert (fix.kind, fix.step, fix.answer) == ("tool_call", 2, "Ilse")
    assert [(c.tool, c.arguments) for c in fix.calls] == [("open", {"n": 1})]

    same_calls = correction_from_demonstration(DEMO + [answer("Nobody")], DEMO + [answer("Ilse")], "Ilse")
    assert (same_calls.kind, same_calls.step, same_calls.calls) == ("answer", 4, [])

    too_short = correction_from_demonstration(DEMO[:2] + [answer("Nobody")], DEMO + [answer("Ilse")], "Ilse")
    assert (too_short.kind, too_short.step) == ("tool_call", 2)
    assert [c.tool for c in too_short.calls] == ["open"]

    assert correction_from_demonstration(DEMO + [answer("Ilse")], DEMO + [answer("Ilse")], "Ilse") is None


@pytest.mark.django_db
def test_wrong_episodes_are_corrected_replayed_and_reviewed_by_the_rubric():
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=6, samples_per_agent=2, seed=2)
    counts = campaign_simulate_corrections(campaign=campaign, environment="encyclopedia", limit=3, seed=0)
    made = list(Correction.objects.select_related("original", "corrected"))
    assert counts["made"] == len(made) <= 3 and len(made) > 0
    assert len({c.original.task_id for c in made}) == len(made)  # one per task
    for correction in made:
        assert correction.original.outcome["correct"] is False and correction.replayed
        right = correction.corrected.outcome["correct"]
        assert correction.status == ("accepted" if right else "rejected") and correction.review_note
        assert correction.author.is_synthetic
    assert counts["accepted"] + counts["rejected"] == len(made)
    again = campaign_simulate_corrections(campaign=campaign, environment="encyclopedia", limit=len(made), seed=0)
    assert again["made"] == 0 and Correction.objects.count() == len(made)  # a resumed round adds none past its limit
