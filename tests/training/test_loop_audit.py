"""The audit of a round, on hand-built rounds: it takes the reward model's favourite episodes
(and the labelled pairs it most disagrees with), it is blind, and its result reads each vote
from the favourite's side."""

import pytest
from django.test import Client

from annotate.models import Comparison
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from tests.factories import CampaignFactory, PolicyFactory, TaskFactory, TrajectoryFactory, UserFactory
from training.loop.audit import audit_create, audit_result, disagreement_candidates, top_candidates
from training.loop.report import loop_curves, loop_report
from training.models import AuditItem, Evaluation, EvaluationEntry, EvaluationEpisode, LoopRound

pytestmark = pytest.mark.django_db


def steps(answer: str) -> list[dict]:
    return [
        {"kind": "action", "tool": "search", "arguments": {"query": answer}},
        {"kind": "observation", "tool": "search", "content": f"[0] {answer}"},
        {"kind": "answer", "text": answer, "quotes": []},
    ]


def trajectory(task, policy, answer: str, correct: bool):
    return TrajectoryFactory(
        task=task,
        policy=policy,
        steps=steps(answer),
        outcome={"correct": correct, "steps": 1, "tool_errors": 0, "loop": False},
    )


class Round:
    """Round one of a loop, done: the start and the round's policy evaluated on 5 tasks, 2
    samples each, with reward-model scores. The round policy's best sample per task scores
    task 0: 0.1, task 1: 3.0, task 2: 2.0 (the same episode as the start's), task 3: 1.0,
    task 4: 5.0; so the top three with a different start episode are tasks 4, 1, 3."""

    def __init__(self):
        self.start, self.after = PolicyFactory(name="bc-start-policy"), PolicyFactory(name="rl-round-policy")
        self.tasks = [TaskFactory() for _ in range(5)]
        self.evaluation = Evaluation.objects.create(name="tiny round 1", reference_policy=self.start)
        base = EvaluationEntry.objects.create(
            evaluation=self.evaluation, label="start", policy=self.start, is_baseline=True
        )
        candidate = EvaluationEntry.objects.create(
            evaluation=self.evaluation, label="RL best", policy=self.after, position=1
        )
        self.favourites = {}
        best = [0.1, 3.0, 2.0, 1.0, 5.0]
        for i, task in enumerate(self.tasks):
            start_episode = trajectory(task, self.start, f"start {i}", correct=True)
            EvaluationEpisode.objects.create(
                entry=base, task=task, trajectory=start_episode, mode="sampled", sample=0, correct=True, rm_score=0.0
            )
            for sample, score in enumerate((best[i], best[i] - 1.0)):
                episode = (
                    start_episode
                    if (i == 2 and sample == 0)
                    else trajectory(task, self.after, f"rl {i}.{sample}", correct=(i != 4))
                )
                EvaluationEpisode.objects.create(
                    entry=candidate,
                    task=task,
                    trajectory=episode,
                    mode="sampled",
                    sample=sample,
                    correct=i != 4,
                    rm_score=score,
                )
                if sample == 0:
                    self.favourites[i] = episode
        self.campaign = CampaignFactory(name="tiny round 1 comparisons", votes_per_comparison=1)
        self.round = LoopRound.objects.create(
            loop="tiny",
            number=1,
            stage="done",
            start_policy=self.start,
            reference_policy=self.start,
            policy=self.after,
            evaluation=self.evaluation,
            campaign=self.campaign,
        )


def vote(campaign, choose_favourite: dict[int, bool], annotator=None):
    """One vote per comparison: for the favourite's side where `choose_favourite[comparison]`."""
    annotator = annotator or UserFactory(roles=["annotator"])
    while (assignment := assignment_next(campaign=campaign, annotator=annotator)) is not None:
        comparison = assignment.comparison
        item = comparison.audit_item
        favourite_is_a = item.favourite_id == comparison.trajectory_a_id
        wants_a = favourite_is_a == choose_favourite[comparison.pk]
        on_screen_left = wants_a == assignment.left_is_a  # the screen shows A on the left when left_is_a
        judgement_submit(
            assignment_id=assignment.pk, annotator=annotator, verdict=Verdict(choice=1 if on_screen_left else 5)
        )


def test_the_audit_takes_the_models_favourites_against_the_start_and_is_blind():
    built = Round()
    top = top_candidates(built.round, size=3)
    assert [item["favourite"] for item in top] == [built.favourites[4], built.favourites[1], built.favourites[3]]
    assert [item["favourite_score"] for item in top] == [5.0, 3.0, 1.0]
    assert all(item["other"].policy == built.start for item in top)

    campaign = audit_create(loop_round=built.round, top=top, disagreements=[], votes=1)
    built.round.refresh_from_db()
    assert built.round.audit_campaign == campaign and campaign.comparisons.count() == 3
    # Blind: the guidelines name neither side, and a comparison's A is the lower id, not the favourite.
    assert "reward model" not in campaign.guidelines.lower() and "favourite" not in campaign.guidelines.lower()
    assert all(c.trajectory_a_id < c.trajectory_b_id for c in campaign.comparisons.all())
    assert {i.favourite_id for i in AuditItem.objects.filter(kind="top")} == {built.favourites[t].pk for t in (4, 1, 3)}
    # ... and the workbench names neither policy nor says which side the model scored.
    annotator = UserFactory(roles=["annotator"])
    client = Client()
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.pk}/label/")
    text = page.content.decode()
    assert page.status_code == 200 and "[start " in text and "[rl " in text  # a comparison is on screen
    assert built.start.name not in text and built.after.name not in text and "score" not in text.lower()

    # People prefer the favourite on two comparisons of three: 2/3, read from the favourite's side
    # whichever side of the screen it was on.
    items = {item.favourite_id: item.comparison_id for item in AuditItem.objects.all()}
    vote(
        campaign,
        {
            items[built.favourites[4].pk]: False,
            items[built.favourites[1].pk]: True,
            items[built.favourites[3].pk]: True,
        },
        annotator,
    )  # who holds the page's lease
    result = audit_result(built.round)["top"]
    assert result["judged"] == 3 and result["favourite_preferred"] == pytest.approx(2 / 3)
    assert 0 <= result["low"] <= result["favourite_preferred"] <= result["high"] <= 1
    assert result["favourite_correct"] == pytest.approx(2 / 3)  # task 4's favourite answered wrong
    assert result["other_correct"] == 1.0  # the start's episodes beside them were all right
    assert audit_result(built.round)["disagreement"]["judged"] == 0


def test_disagreements_are_the_labelled_pairs_the_model_most_contradicts():
    built = Round()
    task = built.tasks[0]
    pairs = []
    for i in range(3):
        a, b = sorted(
            (trajectory(task, built.start, f"x{i}", True), trajectory(task, built.start, f"y{i}", False)),
            key=lambda t: t.pk,
        )
        pairs.append(Comparison.objects.create(campaign=built.campaign, task=task, trajectory_a=a, trajectory_b=b))
    annotator = UserFactory(roles=["annotator"])
    while (assignment := assignment_next(campaign=built.campaign, annotator=annotator)) is not None:
        # Everyone's label: A better.
        judgement_submit(
            assignment_id=assignment.pk, annotator=annotator, verdict=Verdict(choice=1 if assignment.left_is_a else 5)
        )
    # The model agrees on pair 0, disagrees a little on pair 1 and strongly on pair 2.
    scores = {pairs[0].pk: (2.0, 0.0), pairs[1].pk: (0.0, 0.5), pairs[2].pk: (-1.0, 3.0)}
    found = disagreement_candidates(built.round, size=5, scores=scores)
    assert [item["favourite"] for item in found] == [pairs[2].trajectory_b, pairs[1].trajectory_b]
    assert disagreement_candidates(built.round, size=1, scores=scores)[0]["favourite"] == pairs[2].trajectory_b

    audit_create(loop_round=built.round, top=[], disagreements=found, votes=1)
    assert set(AuditItem.objects.values_list("kind", flat=True)) == {"disagreement"}
    items = list(AuditItem.objects.all())
    vote(built.round.audit_campaign, {item.comparison_id: False for item in items})  # people side with the labels
    assert audit_result(built.round)["disagreement"]["favourite_preferred"] == 0.0


def test_nothing_to_audit_makes_no_campaign_and_the_report_reads_round_zero_from_the_start():
    built = Round()
    assert audit_create(loop_round=built.round, top=[], disagreements=[], votes=1) is None
    rows = loop_report("tiny")
    assert [row["number"] for row in rows] == [0, 1] and rows[1]["audit"] is None
    assert rows[0]["sqrt_kl"] == 0.0 and loop_curves(rows)["sqrt_kl"][0] == (0, 0.0)
