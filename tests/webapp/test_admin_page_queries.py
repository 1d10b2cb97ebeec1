"""The pages an admin opens (benchmarks/admin_pages.py times them) read a fixed number of SQL
queries however many comparisons, votes, annotators, judge calls, runs or evaluation systems
they show: an N+1 coming back fails here before it shows in the benchmark."""

from __future__ import annotations

import pytest
from django.test import Client

from annotate.models import Comparison, JudgeCall
from tests.helpers import Built, annotators, label_all, make_campaign
from tests.training.judge_fixtures import chat_judge_votes
from webapp.models import Run

pytestmark = pytest.mark.django_db

# The counts of each page at the sizes below, with the session and the user; a page that reads
# per row adds at least one query per comparison, annotator, call or system, far above these.
QUALITY, JUDGE, EVALUATION = 13, 7, 16


@pytest.fixture
def admin_client(role_users) -> Client:
    client = Client()
    client.force_login(role_users["admin"])
    return client


def _campaign_with_a_judge(comparisons: int, people: int):
    campaign = make_campaign(comparisons, k=people)
    label_all(campaign, annotators(people))
    judge = chat_judge_votes(campaign)
    for comparison in Comparison.objects.filter(campaign=campaign):
        JudgeCall.objects.create(
            judge=judge,
            comparison=comparison,
            status="ok",
            request={"messages": [{"role": "user", "content": "Which is better? " * 50}]},
            response='{"verdict": "A better"}',
        )
        Run.objects.create(kind="judge", name="judge run", config={"judge_id": judge.pk, "campaign_id": campaign.pk})
    return campaign, judge


@pytest.mark.parametrize("comparisons, people", [(3, 2), (12, 4)])
def test_the_quality_page_reads_a_fixed_number_of_queries(
    admin_client, django_assert_max_num_queries, comparisons, people
):
    campaign, _ = _campaign_with_a_judge(comparisons, people)
    with django_assert_max_num_queries(QUALITY):
        response = admin_client.get(f"/annotate/campaigns/{campaign.pk}/quality/")
    assert response.status_code == 200 and b"chat-judge" in response.content


@pytest.mark.parametrize("comparisons, people", [(3, 2), (12, 4)])
def test_the_judge_page_reads_a_fixed_number_of_queries(
    admin_client, django_assert_max_num_queries, comparisons, people
):
    _, judge = _campaign_with_a_judge(comparisons, people)
    with django_assert_max_num_queries(JUDGE):
        response = admin_client.get(f"/training/judges/{judge.pk}/")
    page = response.content.decode()
    assert response.status_code == 200 and page.count("prompt and answer") == comparisons


def test_the_evaluation_page_reads_a_fixed_number_of_queries(admin_client, django_assert_max_num_queries):
    built = Built()
    with django_assert_max_num_queries(EVALUATION):
        response = admin_client.get(built.url())
    assert response.status_code == 200 and built.evaluation.name.encode() in response.content
