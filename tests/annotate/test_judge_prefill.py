"""A judge's verdict is filled in for people only where it is sure (issue 44): a reward-model judge
at P(A) = 0.51 is a coin flip, shown with its confidence and not prefilled, on the page, in the
API's `judge_suggestion` and in what the judgement records as shown (the ORM path and the
labeling cycle's SQL alike); after the submit, "as you did" only for the same side and strength."""

import pytest
from django.db import connection

from annotate.judges.votes import VoteIn, judge_votes_store
from annotate.models import Comparison, Judge, Judgement
from tests.conftest import token_client
from tests.training.judge_fixtures import rubric_campaign

pytestmark = [pytest.mark.django_db]


def _reward_model_judge_votes(campaign, probabilities: list[float]) -> Judge:
    judge = Judge.objects.create(name="rm-judge", kind="reward_model", config={})
    for p, comparison in zip(probabilities, Comparison.objects.filter(campaign=campaign).order_by("id")):
        choice = 2 if p > 0.5 else 4  # a reward-model judge votes the slight side of its probability
        vote = VoteIn(probe="first", choice=choice, probability_a=p)
        judge_votes_store(judge=judge, comparison=comparison, votes=[vote], run_id=None, count_toward_votes=False)
    return judge


@pytest.mark.parametrize("sql_path", [True, False])
def test_an_unsure_judge_is_shown_with_its_confidence_and_not_filled_in(sql_path, monkeypatch):
    from tests.factories import UserFactory

    if not sql_path:  # the ORM path every other database takes
        monkeypatch.setattr(connection, "vendor", "sqlite")
    campaign = rubric_campaign(n=2, k=1)
    judge = _reward_model_judge_votes(campaign, [0.51, 0.9])
    campaign.judge_mode, campaign.shown_judge = "prefilled", judge
    campaign.save()
    person = UserFactory(roles=["annotator"])
    api = token_client(person)
    seen = {}
    for _ in range(2):
        body = api.get(f"/api/v1/assignments/next?campaign={campaign.pk}").json()
        comparison = Comparison.objects.get(assignments__id=body["id"])
        p = comparison.judge_votes.get().probability_a
        seen[p] = body["judge_suggestion"]
        page = client_page(person, campaign)
        if p == 0.51:
            assert body["judge_suggestion"] is None
            assert "too unsure to fill in" in page and "P(left better)" in page
            assert 'value="2" checked' not in page and 'value="4" checked' not in page
        else:
            assert body["judge_suggestion"] in (2, 4) and "The verdict is filled in" in page
        answer = api.post(f"/api/v1/assignments/{body['id']}/judgement", {"choice": 3}, format="json")
        assert answer.status_code == 201, answer.content
        recorded = Judgement.objects.get(pk=answer.json()["id"]).judge_suggestion
        assert recorded == (None if p == 0.51 else comparison.judge_votes.get().choice)
    assert set(seen) == {0.51, 0.9}


def client_page(person, campaign) -> str:
    from django.test import Client

    client = Client()
    client.force_login(person)
    return client.get(f"/annotate/campaigns/{campaign.pk}/label/").content.decode()


def test_after_the_submit_as_you_did_means_the_same_side_and_strength():
    from annotate.workbench import after_vote_words

    base = {"yours": "Left slightly better", "confidence": None}
    assert after_vote_words({**base, "agrees": True, "same_side": True}) == ", as you did"
    assert "the same side at another strength, Left slightly better" in after_vote_words(
        {**base, "agrees": False, "same_side": True}
    )
    assert after_vote_words({**base, "agrees": False, "same_side": False}) == "; you said Left slightly better"
    sure = {**base, "agrees": True, "same_side": True, "confidence": {"p_left": 0.51, "sure": 0.51}}
    assert after_vote_words(sure) == ", P(left better) 51%, as you did"
