"""Judges beside people (issue 32): judges of each kind vote on a campaign through a run, their
votes stay apart from people's unless counted, the modes show them to annotators, the queue
can be ordered disagreement-first, and snapshots and reward-model runs take AI feedback only
when asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from annotate.export_card import dataset_card
from annotate.exports import iter_rows
from annotate.judgement_input import Verdict
from annotate.judges.votes import campaign_order
from annotate.models import Comparison, Judge, Judgement, JudgeVote, SnapshotPair
from annotate.services.assignments import assignment_next, judgement_submit
from annotate.services.datasets import SnapshotFilters, snapshot_create
from rewardmodel.models import RewardModel
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.helpers import annotators, label_all
from tests.rewardmodel.rm_fixtures import simulated_snapshot, tiny_policy
from tests.training.judge_fixtures import chat_judge_votes, judge_run, rubric_campaign, rubric_judge
from tests.training.ppo_fixtures import low_token_reward_model
from training.judges.services import judge_create, probe_drawn
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin():
    return UserFactory(roles=["admin"])


# --- A rubric judge through a run ---------------------------------------------------------------


def test_a_rubric_judge_votes_on_every_comparison_with_probes_and_a_rerun_asks_nothing_again(admin):
    campaign = rubric_campaign(n=6)
    judge = rubric_judge()
    run = judge_run(admin, judge_id=judge.pk, campaign_id=campaign.pk, swapped_share=1.0, repeat_share=0.5, seed=3)
    assert run.status == "succeeded", run.error
    firsts = JudgeVote.objects.filter(judge=judge, probe="first")
    assert firsts.count() == 6
    for vote in firsts.select_related("comparison__trajectory_a"):
        right_side = 1 if vote.comparison.trajectory_a.outcome["correct"] else 5
        assert vote.choice == right_side and not vote.counted and vote.run_id == run.pk
    assert JudgeVote.objects.filter(judge=judge, probe="swapped").count() == 6
    repeats = JudgeVote.objects.filter(judge=judge, probe="repeat").count()
    ids = Comparison.objects.filter(campaign=campaign).values_list("id", flat=True)
    assert repeats == sum(probe_drawn(3, cid, "repeat", 0.5) for cid in ids)  # a seeded draw per comparison
    # People's figures are untouched: no judgement, no vote counted, nothing completed.
    assert not Judgement.objects.exists()
    assert set(Comparison.objects.filter(campaign=campaign).values_list("votes", "status")) == {(0, "open")}
    assert run.summary["voted"] == 12 + repeats

    again = judge_run(admin, judge_id=judge.pk, campaign_id=campaign.pk, swapped_share=1.0, repeat_share=0.5, seed=3)
    assert again.status == "succeeded" and again.summary["asked"] == 0


def test_a_rubric_judge_without_a_known_answer_does_not_invent_a_vote(admin):
    campaign = rubric_campaign(n=2)
    Comparison.objects.filter(campaign=campaign).first().trajectory_a.__class__.objects.update(outcome=None)
    for c in Comparison.objects.filter(campaign=campaign):
        c.task.reference_answer = ""
        c.task.save()
    run = judge_run(admin, judge_id=rubric_judge().pk, campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    # A run that stored nothing did not succeed: it fails and says why.
    assert run.status == "failed" and "none of the 2 comparisons asked has a known answer" in run.error
    assert not JudgeVote.objects.exists()


def test_counted_votes_take_slots_of_k_and_never_more(admin):
    campaign = rubric_campaign(n=3, k=2)
    person = annotators(1)[0]
    label_all(campaign, [person], choice=2)  # one person's vote on each: one slot left of two
    run = judge_run(
        admin, judge_id=rubric_judge().pk, campaign_id=campaign.pk, count_toward_votes=True, swapped_share=0
    )
    assert run.status == "succeeded" and run.summary["counted"] == 3
    assert set(Comparison.objects.filter(campaign=campaign).values_list("votes", "slots_taken", "status")) == {
        (2, 2, "complete")
    }
    # A second judge finds no free slot: its votes are stored, not counted.
    other = Judge.objects.create(name="rubric-2", kind="rubric")
    run = judge_run(admin, judge_id=other.pk, campaign_id=campaign.pk, count_toward_votes=True, swapped_share=0)
    assert (
        run.summary["counted"] == 0 and JudgeVote.objects.filter(judge=other, probe="first", counted=False).count() == 3
    )
    assert assignment_next(campaign=campaign, annotator=annotators(1)[0]) is None


def test_gold_comparisons_are_never_judged(admin):
    campaign = rubric_campaign(n=2)
    Comparison.objects.filter(campaign=campaign).update(is_gold=True, gold_choice=1)
    with pytest.raises(ArbiterError, match="no comparison for a judge"):
        judge_run(admin, judge_id=rubric_judge().pk, campaign_id=campaign.pk)


# --- A reward-model judge ------------------------------------------------------------------------


def test_a_reward_model_judge_scores_both_sides_and_is_blind_to_the_order(admin):
    policy = tiny_policy()
    path = low_token_reward_model(Path(settings.VAR_DIR) / "reward-models" / "low-token-test", policy.model_dir)
    snapshot = simulated_snapshot(tasks=6, seed=7)
    model = RewardModel.objects.create(
        name="low-token", snapshot=snapshot, backbone="policy-llama", model_dir=str(path)
    )
    judge = judge_create(
        data={"name": "rm", "kind": "reward_model", "config": {"reward_model_id": model.pk}}, created_by=admin
    )
    campaign = snapshot.campaigns.get()
    run = judge_run(admin, judge_id=judge.pk, campaign_id=campaign.pk, swapped_share=1.0, repeat_share=1.0)
    assert run.status == "succeeded", run.error
    firsts = {v.comparison_id: v for v in JudgeVote.objects.filter(judge=judge, probe="first")}
    assert len(firsts) == Comparison.objects.filter(campaign=campaign).count()
    for vote in JudgeVote.objects.filter(judge=judge).exclude(probe="first"):
        first = firsts[vote.comparison_id]
        assert vote.choice == first.choice and vote.probability_a == pytest.approx(first.probability_a, abs=1e-5)
    assert all(0 <= v.probability_a <= 1 for v in firsts.values())
    # The agreement panel reads it as a judge that never flips and always answers the same.
    api = token_client(admin)
    panel = api.get(f"/api/v1/campaigns/{campaign.pk}/judge-agreement").json()["judges"][0]
    assert panel["position_bias"]["flip_rate"]["value"] == 0.0
    assert panel["self_consistency"]["agreement"]["value"] == 1.0
    assert panel["dimensions"][0]["vs_humans"]["n"] > 0  # simulated people voted on these


# --- Modes: what annotators see ----------------------------------------------------------------------


def _voted_campaign(admin, mode):
    campaign = rubric_campaign(n=2, k=1)
    judge = chat_judge_votes(campaign)
    campaign.judge_mode, campaign.shown_judge = mode, judge
    campaign.save()
    return campaign, judge


def test_blind_mode_shows_nothing_before_or_after_submit(admin):
    campaign, _ = _voted_campaign(admin, "blind")
    api = token_client(annotators(1)[0])
    body = api.get(f"/api/v1/assignments/next?campaign={campaign.pk}").json()
    assert body["judge_suggestion"] is None
    answer = api.post(f"/api/v1/assignments/{body['id']}/judgement", {"choice": 3}, format="json").json()
    assert answer["judge_vote"] is None


def test_prefilled_mode_gives_the_verdict_in_screen_terms_and_records_what_was_shown(admin):
    campaign, judge = _voted_campaign(admin, "prefilled")
    api = token_client(annotators(1)[0])
    for _ in range(2):
        body = api.get(f"/api/v1/assignments/next?campaign={campaign.pk}").json()
        assignment = body["id"]
        from annotate.models import Assignment

        a = Assignment.objects.select_related("comparison").get(pk=assignment)
        vote = JudgeVote.objects.get(judge=judge, comparison=a.comparison, probe="first")
        assert body["judge_suggestion"] == (vote.choice if a.left_is_a else 6 - vote.choice)
        answer = api.post(f"/api/v1/assignments/{assignment}/judgement", {"choice": 3}, format="json").json()
        assert answer["judge_vote"]["choice"] == vote.choice and answer["judge_vote"]["judge"] == judge.name
        assert Judgement.objects.get(pk=answer["id"]).judge_suggestion == vote.choice


def test_after_submit_mode_shows_the_vote_only_once_submitted(admin):
    campaign, judge = _voted_campaign(admin, "after_submit")
    person = annotators(1)[0]
    api = token_client(person)
    body = api.get(f"/api/v1/assignments/next?campaign={campaign.pk}").json()
    assert body["judge_suggestion"] is None
    answer = api.post(f"/api/v1/assignments/{body['id']}/judgement", {"choice": 1}, format="json").json()
    assert answer["judge_vote"]["judge"] == judge.name
    assert Judgement.objects.get(pk=answer["id"]).judge_suggestion is None
    # The page says it above the next comparison (HTMX submit).
    client = token_client(person)
    client.force_login(person)
    page = client.get(f"/annotate/campaigns/{campaign.pk}/label/")
    nxt = page.context["assignment"]
    response = client.post(f"/annotate/assignments/{nxt.pk}/judgement/", {"choice": "3"}, HTTP_HX_REQUEST="true")
    assert b'id="judge-after"' in response.content and judge.name.encode() in response.content


def test_a_mode_other_than_blind_needs_a_judge(admin):
    campaign = rubric_campaign(n=1)
    api = token_client(admin)
    response = api.patch(f"/api/v1/campaigns/{campaign.pk}", {"judge_mode": "prefilled"}, format="json")
    assert response.status_code == 400 and "shown_judge" in str(response.json())
    rubric = rubric_judge()
    response = api.patch(
        f"/api/v1/campaigns/{campaign.pk}", {"judge_mode": "prefilled", "shown_judge": rubric.pk}, format="json"
    )
    assert response.status_code == 400 and "knows the answer" in str(response.json())  # never shown to annotators
    for bad in ({"judge_mode": "loud"}, {"shown_judge": "x"}, {"shown_judge": [1]}, {"shown_judge": 10**12}):
        response = api.patch(f"/api/v1/campaigns/{campaign.pk}", bad, format="json")
        assert response.status_code == 400, bad


# --- Ordering disagreement-first ---------------------------------------------------------------------


def test_disagreement_first_serves_disputed_comparisons_before_agreed_ones(admin):
    campaign = rubric_campaign(n=4, k=1)
    first, second = rubric_judge("one"), rubric_judge("two")
    judge_run(admin, judge_id=first.pk, campaign_id=campaign.pk, swapped_share=0)
    judge_run(admin, judge_id=second.pk, campaign_id=campaign.pk, swapped_share=0)
    disputed = Comparison.objects.filter(campaign=campaign).order_by("id")[2]
    JudgeVote.objects.filter(judge=second, comparison=disputed).update(choice=3)  # the judges now disagree on it
    assert campaign_order(campaign=campaign, ordering="disagreement_first") == 4
    person = annotators(1)[0]
    assert assignment_next(campaign=campaign, annotator=person).comparison_id == disputed.pk
    assert campaign_order(campaign=campaign, ordering="none") == 4
    assert set(Comparison.objects.filter(campaign=campaign).values_list("priority", flat=True)) == {0.0}


def test_ordering_without_votes_or_with_a_bad_name_is_refused_with_a_reason(admin):
    campaign = rubric_campaign(n=1)
    with pytest.raises(ArbiterError, match="No judge has voted"):
        campaign_order(campaign=campaign, ordering="disagreement_first")
    api = token_client(admin)
    for body in ({"ordering": "loudest"}, {"ordering": ["none"]}, {"judges": "x", "ordering": "none"}, []):
        response = api.post(f"/api/v1/campaigns/{campaign.pk}/order", body, format="json")
        assert response.status_code == 400 and response.json()["detail"], body


# --- Snapshots and reward-model runs ---------------------------------------------------------------


def test_a_snapshot_excludes_judge_votes_unless_asked_and_marks_them(admin):
    campaign = rubric_campaign(n=8, k=1)
    person = annotators(1)[0]
    for _ in range(4):  # people vote on half of the comparisons
        a = assignment_next(campaign=campaign, annotator=person)
        judgement_submit(assignment_id=a.id, annotator=person, verdict=Verdict(choice=2))
    judge = rubric_judge()
    judge_run(admin, judge_id=judge.pk, campaign_id=campaign.pk, swapped_share=0)

    human = snapshot_create(name="people", campaigns=[campaign], test_fraction=0.0)
    assert set(SnapshotPair.objects.filter(snapshot=human).values_list("source", flat=True)) == {"human"}
    assert human.stats["sources"] == {"human": 4, "ai": 0}
    assert "judges' votes (AI feedback) are excluded" in dataset_card(human, "trl", "jsonl", {"train": 4})

    ai = snapshot_create(name="ai", campaigns=[campaign], test_fraction=0.0, filters=SnapshotFilters(feedback="ai"))
    assert ai.stats["sources"] == {"human": 0, "ai": 8} and ai.stats["judges"][0]["name"] == judge.name
    rows = list(iter_rows(ai, "trl"))
    assert {r["source"] for r in rows} == {"ai"} and len(rows) == 8

    both = snapshot_create(
        name="both",
        campaigns=[campaign],
        test_fraction=0.0,
        filters=SnapshotFilters(feedback="both", judges=(judge.pk,)),
    )
    assert both.stats["sources"] == {"human": 4, "ai": 4}
    assert "kept apart" in dataset_card(both, "trl", "jsonl", {"train": 8})
    with pytest.raises(ArbiterError, match="no judge with id"):
        snapshot_create(name="x", campaigns=[campaign], filters=SnapshotFilters(feedback="ai", judges=(999999,)))


def test_a_reward_model_run_refuses_feedback_its_snapshot_does_not_hold(admin):
    from rewardmodel.services import snapshot_problems

    campaign = rubric_campaign(n=4, k=1)
    label_all(campaign, annotators(1))
    snapshot = snapshot_create(name="people", campaigns=[campaign], test_fraction=0.5)
    problems = snapshot_problems(snapshot.pk, feedback="ai")
    assert problems and all("judges' votes" in p for p in problems)
