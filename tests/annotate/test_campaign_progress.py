"""The campaigns list's progress: judgements done of needed, pace over the last day and the
finish it implies, open leases, gold accuracy, and what is left for each annotator (a
campaign with nothing left for them offers no Label button)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotate.models import Comparison, Judgement
from annotate.selectors import campaign_progress
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory

pytestmark = pytest.mark.django_db


def campaign_with(comparisons: int, votes: int, gold: int = 0):
    campaign = CampaignFactory(votes_per_comparison=votes, gold_rate=0.5 if gold else 0.0)
    for i in range(comparisons + gold):
        task = TaskFactory()
        a, b = sorted((TrajectoryFactory(task=task), TrajectoryFactory(task=task)), key=lambda t: t.pk)
        Comparison.objects.create(
            campaign=campaign,
            task=task,
            trajectory_a=a,
            trajectory_b=b,
            is_gold=i >= comparisons,
            gold_choice=1 if i >= comparisons else None,
        )
    return campaign


def judge(campaign, annotator, times: int, choice_a: bool = True) -> int:
    made = 0
    for _ in range(times):
        assignment = assignment_next(campaign=campaign, annotator=annotator)
        if assignment is None:
            break
        prefers_left = choice_a == assignment.left_is_a
        judgement_submit(
            assignment_id=assignment.pk, annotator=annotator, verdict=Verdict(choice=1 if prefers_left else 5)
        )
        made += 1
    return made


def test_progress_pace_finish_and_what_is_left_for_each_annotator():
    campaign = campaign_with(comparisons=4, votes=2)
    first, second, third = (UserFactory(roles=["annotator"]) for _ in range(3))
    assert judge(campaign, first, 10) == 4  # one vote on every comparison: all it may give one person
    assert judge(campaign, second, 1) == 1
    old = Judgement.objects.filter(annotator=second).get()
    Judgement.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))  # not in the pace
    leased = assignment_next(campaign=campaign, annotator=third)  # a live lease

    progress = campaign_progress(campaigns=[campaign], user=first)[campaign.pk]
    assert (progress["done"], progress["needed"], progress["share"]) == (5, 8, 5 / 8)
    assert progress["last_day"] == 4 and progress["per_hour"] == pytest.approx(4 / 24)
    assert progress["eta_hours"] == pytest.approx(3 / (4 / 24))
    assert progress["open_leases"] == 1 and progress["mine"] == 4
    assert progress["left_for_you"] == 0  # judged them all
    # The second has three comparisons left; the third holds one lease and two more are free.
    assert campaign_progress(campaigns=[campaign], user=second)[campaign.pk]["left_for_you"] == 2
    third_left = campaign_progress(campaigns=[campaign], user=third)[campaign.pk]["left_for_you"]
    assert leased is not None and third_left == 3  # the lease it holds, and the two with a free slot

    client = Client()
    client.force_login(first)
    page = client.get("/annotate/campaigns/").content.decode()
    row = page.split(f'id="campaign-{campaign.pk}"')[1].split("</tr>")[0]
    assert "5 / 8" in row and "nothing left for you" in row and "Label</a>" not in row
    client.force_login(second)
    row = client.get("/annotate/campaigns/").content.decode().split(f'id="campaign-{campaign.pk}"')[1]
    assert "Label</a>" in row.split("</tr>")[0]


def test_a_finished_campaign_says_done_and_gold_accuracy_is_read_against_the_gold_side():
    campaign = campaign_with(comparisons=1, votes=1, gold=2)
    annotator = UserFactory(roles=["annotator"])
    Comparison.objects.filter(campaign=campaign, is_gold=True).update(status="complete")  # ordinary work first
    assert judge(campaign, annotator, 10) == 1
    # Gold answers are "A much better": one vote on A's side (right), one on B's (wrong).
    for comparison, choice in zip(Comparison.objects.filter(campaign=campaign, is_gold=True).order_by("id"), (2, 4)):
        Judgement.objects.create(comparison=comparison, annotator=annotator, choice=choice)
    progress = campaign_progress(campaigns=[campaign], user=annotator)[campaign.pk]
    assert progress["done"] == progress["needed"] == 1 and progress["eta_hours"] == 0.0
    assert progress["gold_accuracy"] == 0.5 and progress["mine"] == 3
    empty = CampaignFactory()
    nothing = campaign_progress(campaigns=[empty], user=annotator)[empty.pk]
    assert (nothing["needed"], nothing["share"], nothing["eta_hours"], nothing["left_for_you"]) == (0, None, None, 0)


def test_the_api_lists_active_campaigns_with_the_callers_progress():
    from tests.conftest import api_rows, token_client

    campaign = campaign_with(comparisons=2, votes=1)
    annotator = UserFactory(roles=["annotator"])
    judge(campaign, annotator, 1)
    rows = api_rows(token_client(annotator), "/api/v1/campaigns/")
    row = next(r for r in rows if r["id"] == campaign.pk)
    assert row["progress"]["done"] == 1 and row["progress"]["needed"] == 2
    assert row["progress"]["left_for_you"] == 1 and row["progress"]["mine"] == 1
    assert token_client(UserFactory()).get("/api/v1/campaigns/").status_code == 403  # no role


def test_the_home_page_tells_an_admin_which_campaigns_finished_or_stalled():
    from annotate.models import Campaign

    finished = campaign_with(comparisons=1, votes=1)
    annotator = UserFactory(roles=["annotator"])
    judge(finished, annotator, 1)
    stalled = campaign_with(comparisons=2, votes=1)
    judge(stalled, annotator, 1)
    Judgement.objects.filter(comparison__campaign=stalled).update(created_at=timezone.now() - timedelta(days=2))
    fresh = campaign_with(comparisons=2, votes=1)  # started today, nothing judged yet: not stalled
    old_untouched = campaign_with(comparisons=1, votes=1)
    Campaign.objects.filter(pk=old_untouched.pk).update(created_at=timezone.now() - timedelta(days=3))

    admin = UserFactory(roles=["admin"])
    client = Client()
    client.force_login(admin)
    page = client.get("/").content.decode()
    notices = page.split('id="campaign-notices"')[1].split("</section>")[0]
    assert f"{finished.name} has finished" in notices
    assert f"{stalled.name} has stalled" in notices and f"{old_untouched.name} has stalled" in notices
    assert fresh.name not in notices
    client.force_login(annotator)  # annotators are not told; they see what is left for them
    page = client.get("/").content.decode()
    assert 'id="campaign-notices"' not in page
    assert f"Label {fresh.name}</a> · 2 left for you" in page and f"Label {finished.name}<" not in page
