"""The comparison screen over plain HTTP: fragments, refusals, escaping, guidelines, counts,
alignment, identical pairs, adjudication."""

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotate.models import Assignment, Comparison, Judgement, Trajectory
from annotate.quality import annotator_counts
from annotate.selectors import campaign_progress
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
from tests.helpers import DETOUR, REJOIN, START, TOOL_STEPS, make_campaign
from webapp.templatetags.arbiter import markdown_safe

pytestmark = pytest.mark.django_db


def _assignment(client, campaign):
    client.get(f"/annotate/campaigns/{campaign.id}/label/")
    return Assignment.objects.latest("id")


def test_submit_with_htmx_returns_the_next_comparison_fragment(client, annotator):
    campaign = make_campaign(n_comparisons=2, k=1)
    client.force_login(annotator)
    first = _assignment(client, campaign)
    response = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": 3}, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 200 and "<html" not in page
    second = Assignment.objects.latest("id")
    assert second.id != first.id and f'data-assignment="{second.id}"' in page
    assert "<b>1</b> left for you" in page and "<b>1</b> today" in page
    assert Judgement.objects.get().choice == 3


def test_missing_choice_keeps_the_same_comparison_with_a_message(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    client.force_login(annotator)
    first = _assignment(client, campaign)
    response = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": ""}, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert "pick a point on the scale" in page and f'data-assignment="{first.id}"' in page
    plain = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": "9"})
    assert plain.status_code == 400 and "choice must be 1-5, not &#x27;9&#x27;" in plain.content.decode()
    assert Judgement.objects.count() == 0


def test_a_refused_submit_shows_what_was_sent_again(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    client.force_login(annotator)
    first = _assignment(client, campaign)
    sent = {"both_bad": "on", "first_wrong_left": "0", "rationale": "the left one loops"}  # no point on the scale
    response = client.post(f"/annotate/assignments/{first.id}/judgement/", sent)
    page = response.content.decode()
    assert response.status_code == 400 and "pick a point on the scale" in page
    assert 'name="both_bad" checked' in page and 'name="first_wrong_left" value="0" checked' in page
    assert "the left one loops</textarea>" in page
    assert Judgement.objects.count() == 0


def test_required_rationale_is_asked_for(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1, rationale_required=True)
    client.force_login(annotator)
    first = _assignment(client, campaign)
    response = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": 2})
    assert response.status_code == 400 and "requires a rationale" in response.content.decode()
    assert Judgement.objects.count() == 0


def test_posting_to_someone_elses_assignment_is_refused(client, role_users):
    campaign = make_campaign(n_comparisons=1, k=2)
    client.force_login(role_users["annotator"])
    theirs = _assignment(client, campaign)
    client.force_login(role_users["admin"])
    response = client.post(f"/annotate/assignments/{theirs.id}/judgement/", {"choice": 2})
    assert response.status_code == 400 and "not assigned to you" in response.content.decode()
    assert Judgement.objects.count() == 0


def test_trajectory_text_is_escaped(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    comparison = campaign.comparisons.get()
    trajectory = comparison.trajectory_a
    trajectory.steps = [
        {"kind": "thought", "text": "<script>alert(1)</script>"},
        {"kind": "answer", "text": "<b>bold</b>", "quotes": ["<i>q</i>"]},
    ]
    trajectory.save()
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def test_guidelines_markdown_is_sanitized():
    html = markdown_safe(
        '## Rules\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) <a href="javascript:alert(1)">y</a> '
        "<img src=x onerror=alert(1)> **ok**"
    )
    assert "<h2>Rules</h2>" in html and "<strong>ok</strong>" in html
    assert "<script" not in html and "alert(1)</" not in html and 'href="javascript' not in html
    assert "onerror" not in html and "<img" not in html


def test_guidelines_markdown_reads_as_commonmark():
    """A bullet list right after a numbered one is a list of its own; a list may follow a line
    of text directly; tables and fenced code still render."""
    html = markdown_safe("1. one\n2. two\n- bullet\n\nIntro:\n- a\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```")
    assert "<ol>\n<li>one</li>\n<li>two</li>\n</ol>\n<ul>\n<li>bullet</li>" in html
    assert "<p>Intro:</p>\n<ul>\n<li>a</li>" in html
    assert "<td>1</td>" in html and "<pre><code>code" in html


def test_quality_page_shows_agreement_and_charts(client, researcher):
    campaign = make_campaign(n_comparisons=1, k=1)
    client.force_login(researcher)
    page = client.get(f"/annotate/campaigns/{campaign.id}/quality/").content.decode()
    assert "Krippendorff" in page and "Judgements per day" in page


def _pair_campaign(left, right, *, n=1, k=1):
    campaign = CampaignFactory(votes_per_comparison=k)
    for _ in range(n):
        task = TaskFactory()
        a, b = TrajectoryFactory(task=task, steps=left), TrajectoryFactory(task=task, steps=right)
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return campaign


def test_left_for_you_is_the_campaigns_pages_figure_and_moves_as_the_annotator_labels(client):
    campaign = make_campaign(n_comparisons=4, k=2)
    me, other, third = (UserFactory(roles=["annotator"]) for _ in range(3))

    def same_figure(user):
        counts = annotator_counts(campaign=campaign, annotator=user)
        assert counts["left_for_you"] == campaign_progress(campaigns=[campaign], user=user)[campaign.pk]["left_for_you"]
        return counts

    assert same_figure(me)["left_for_you"] == 4
    held = assignment_next(campaign=campaign, annotator=me)
    assert same_figure(me)["left_for_you"] == 4  # three free plus the one held
    judgement_submit(assignment_id=held.id, annotator=me, verdict=Verdict(choice=2))
    assert same_figure(me)["left_for_you"] == 3
    for user in (other, third):  # the second vote on my comparison, then one vote on the next
        a = assignment_next(campaign=campaign, annotator=user)
        judgement_submit(assignment_id=a.id, annotator=user, verdict=Verdict(choice=2))
    counts = same_figure(me)
    assert (counts["left_for_you"], counts["judged"], counts["today"]) == (3, 1, 1)
    assert same_figure(other)["left_for_you"] == 3 and same_figure(third)["left_for_you"] == 2

    client.force_login(me)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert f"<b>{counts['left_for_you']}</b> left for you" in page and "<b>1</b> today" in page


def test_left_for_you_is_counted_up_to_a_bound_and_says_when_there_are_more(client, monkeypatch):
    """Issue 56: the screen counts free comparisons up to LEFT_COUNTED_UP_TO after every
    judgement, and shows "N+" past it, never a smaller number as if it were all."""
    import annotate.quality

    campaign = make_campaign(n_comparisons=4, k=1)
    me = UserFactory(roles=["annotator"])
    monkeypatch.setattr(annotate.quality, "LEFT_COUNTED_UP_TO", 2)
    counts = annotator_counts(campaign=campaign, annotator=me)
    assert (counts["left_for_you"], counts["left_more"]) == (2, True)
    client.force_login(me)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert "<b>3+</b> left for you" in page  # two of the free ones counted, plus the one now held
    monkeypatch.setattr(annotate.quality, "LEFT_COUNTED_UP_TO", 3)
    assert annotator_counts(campaign=campaign, annotator=me)["left_more"] is False  # three free, one held


def test_today_and_the_pace_per_hour_of_time_on_task():
    campaign = make_campaign(n_comparisons=4, k=1)
    me = UserFactory(roles=["annotator"])
    for _ in range(3):
        a = assignment_next(campaign=campaign, annotator=me)
        judgement_submit(assignment_id=a.id, annotator=me, verdict=Verdict(choice=3))
    assert annotator_counts(campaign=campaign, annotator=me)["per_hour"] is None  # under a minute on task
    Judgement.objects.update(seconds=120)  # 3 judgements in 6 minutes on task: 30 an hour
    counts = annotator_counts(campaign=campaign, annotator=me)
    assert (counts["today"], counts["per_hour"], counts["tz"]) == (3, pytest.approx(30.0), "UTC")
    yesterday = timezone.now() - timedelta(days=1, hours=1)
    Judgement.objects.filter(pk=Judgement.objects.earliest("id").pk).update(created_at=yesterday)
    counts = annotator_counts(campaign=campaign, annotator=me)
    assert (counts["judged"], counts["today"], counts["per_hour"]) == (3, 2, pytest.approx(30.0))


def test_the_label_page_stays_cheap_in_queries(client, annotator):
    campaign = make_campaign(n_comparisons=3, k=3)
    client.force_login(annotator)
    client.get(f"/annotate/campaigns/{campaign.id}/label/")
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/annotate/campaigns/{campaign.id}/label/")
    assert page.status_code == 200 and "left for you" in page.content.decode()
    # Session, user, groups, campaign, the lease (one statement), the counter (two: the free ones
    # counted up to a bound, then the rest), the comparison with both trajectories and its task
    # (one; the trajectories' task is that one, not read again): 13 before these counts.
    assert len(queries) <= 8, "\n".join(q["sql"][:120] for q in queries.captured_queries)


def test_alignment_by_content_by_default_and_by_index_kept_across_a_submit(client, annotator):
    campaign = _pair_campaign(START + REJOIN, START + DETOUR + REJOIN, n=3)
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert 'data-align="content"' in page and "Align by index" in page
    first = Assignment.objects.get()
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/?align=index", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in page and 'data-align="index"' in page and 'name="align" value="index"' in page
    response = client.post(
        f"/annotate/assignments/{first.id}/judgement/", {"choice": 3, "align": "index"}, HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert f'data-assignment="{first.id}"' not in page and 'data-align="index"' in page
    second = Assignment.objects.latest("id")
    plain = client.post(f"/annotate/assignments/{second.id}/judgement/", {"choice": 3, "align": "index"})
    assert plain.status_code == 302 and plain["Location"].endswith("/label/?align=index")
    bogus = client.get(f"/annotate/campaigns/{campaign.id}/label/?align=%3Cb%3E").content.decode()
    assert 'name="align" value="content"' in bogus and "&lt;b&gt;" not in bogus


def test_identical_trajectories_are_flagged_with_the_skip_reason_ready(client, annotator):
    same = START + REJOIN
    campaign = _pair_campaign(same, [dict(s) for s in same])
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert 'id="identical-banner"' in page and "<option selected>Identical trajectories</option>" in page
    different = _pair_campaign(START + REJOIN, START + DETOUR + REJOIN)
    page = client.get(f"/annotate/campaigns/{different.id}/label/").content.decode()
    assert 'id="identical-banner"' not in page and "<option selected>" not in page


def test_adjudication_has_no_default_and_a_submit_without_a_pick_is_refused(client, admin_user):
    campaign = make_campaign(n_comparisons=1, k=2)
    comparison = campaign.comparisons.get()
    client.force_login(admin_user)
    page = client.get(f"/annotate/comparisons/{comparison.id}/").content.decode()
    assert '<option value="" selected>– pick one –</option>' in page and "selected>A much better" not in page
    response = client.post(f"/annotate/comparisons/{comparison.id}/", {"note": "B cites"})
    assert response.status_code == 400 and "Pick the adjudicated label" in response.content.decode()
    comparison.refresh_from_db()
    assert comparison.adjudicated_choice is None
    assert client.post(f"/annotate/comparisons/{comparison.id}/", {"choice": 4, "note": "B cites"}).status_code == 302
    page = client.get(f"/annotate/comparisons/{comparison.id}/").content.decode()
    assert '<option value="4" selected>B better</option>' in page  # the ruling is shown, not a default


def test_the_system_prompt_and_tools_are_shown_folded_once_or_per_side(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    comparison = campaign.comparisons.get()
    tools = [
        {
            "type": "function",
            "function": {"name": "search", "description": "Search <the> corpus.", "parameters": {"type": "object"}},
        },
        {"name": "open", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    ]
    for trajectory in (comparison.trajectory_a, comparison.trajectory_b):
        trajectory.metadata = {"system_prompt": "You are <Quillwort>.", "tools": tools}
        trajectory.save()
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert page.count('<details class="agent-setup"') == 1 and 'data-agent-setup="both sides"' in page
    assert "system prompt and 2 tools" in page and "(search, open)" in page
    assert "You are &lt;Quillwort&gt;." in page and "Search &lt;the&gt; corpus." in page
    assert "&quot;integer&quot;" in page  # the parameters' schema, pretty-printed and escaped

    comparison.trajectory_b.metadata = {"system_prompt": "Another prompt."}
    comparison.trajectory_b.save()
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert page.count('<details class="agent-setup"') == 2 and "Another prompt." in page

    for trajectory in (comparison.trajectory_a, comparison.trajectory_b):
        trajectory.metadata = {}
        trajectory.save()
    assert "agent-setup" not in client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()


def test_guidelines_are_rendered_once_when_saved_not_per_page_view(client, annotator, monkeypatch):
    """A page view renders no Markdown (8,000 '[' took 37 s a view with the former renderer);
    what the campaign stores is the sanitized HTML."""
    from annotate.services.campaigns import campaign_update

    campaign = make_campaign(n_comparisons=1, k=1)
    campaign_update(campaign=campaign, data={"guidelines": "## Be fair\n" + "[" * 8000})
    campaign.refresh_from_db()
    assert campaign.guidelines_html.startswith("<h2>Be fair</h2>")
    import core.markdown

    class NoRendering:
        def render(self, text):
            raise AssertionError("a page view rendered Markdown")

    monkeypatch.setattr(core.markdown, "_MARKDOWN", NoRendering())
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert "<h2>Be fair</h2>" in page


def test_researchers_read_judgements_under_pseudonyms_admins_under_usernames(client, researcher, admin_user):
    """One rule (webapp.roles.annotator_label) on every page where judgements are read: a
    researcher never sees who gave which choice or rationale, as in the API and the exports."""
    from annotate.models import Comparison
    from tests.helpers import annotators, label_all

    campaign = make_campaign(n_comparisons=1, k=1)
    (voter,) = annotators(1)
    voter.username = "alice-real-name"
    voter.save()
    label_all(campaign, [voter])
    comparison = Comparison.objects.get(campaign=campaign)
    pages = (
        f"/annotate/campaigns/{campaign.id}/quality/",
        f"/annotate/comparisons/{comparison.id}/",
        f"/annotate/campaigns/{campaign.id}/",
    )
    client.force_login(researcher)
    for url in pages:
        page = client.get(url).content.decode()
        assert "alice-real-name" not in page, url
    assert voter.pseudonym in client.get(pages[0]).content.decode()
    assert voter.pseudonym in client.get(pages[1]).content.decode()
    client.force_login(admin_user)
    assert "alice-real-name" in client.get(pages[0]).content.decode()
    assert "alice-real-name" in client.get(pages[1]).content.decode()


@pytest.mark.django_db
def test_the_form_refuses_a_rating_out_of_its_scale_in_that_scales_words_and_never_drops_an_unknown_one(client):
    """A 1-5 dimension's 7 is refused as "1-5" (not "1-10"), and a rating of a dimension the
    campaign does not have is refused by name, as the API refuses it, never silently dropped."""
    from annotate.models import Judgement
    from annotate.services.assignments import assignment_next
    from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory

    campaign = CampaignFactory(
        votes_per_comparison=1, dimensions=[{"name": "clarity", "scale": 5, "description": "", "required": False}]
    )
    task = TaskFactory()
    from annotate.models import Comparison

    Comparison.objects.create(
        campaign=campaign,
        task=task,
        trajectory_a=TrajectoryFactory(task=task),
        trajectory_b=TrajectoryFactory(task=task),
    )
    person = UserFactory(roles=["annotator"])
    assignment = assignment_next(campaign=campaign, annotator=person)
    client.force_login(person)
    url = f"/annotate/assignments/{assignment.pk}/judgement/"
    page = client.post(url, {"choice": "2", "rating__clarity__left": "7"}).content.decode()
    assert "rating clarity.left must be a value 1-5, not &#x27;7&#x27;" in page and "1-10" not in page
    page = client.post(url, {"choice": "2", "rating__helpfulness__left": "3"}).content.decode()
    assert "unknown rating dimension &#x27;helpfulness&#x27; (this campaign has: clarity)" in page
    assert not Judgement.objects.exists()
    assert client.post(url, {"choice": "2", "rating__clarity__left": "4"}).status_code in (200, 302)
    assert Judgement.objects.get().ratings == {"clarity": {"A" if assignment.left_is_a else "B": 4}}


@pytest.mark.django_db
def test_a_paused_campaign_says_it_is_paused_and_nothing_that_contradicts_it(client):
    """Before: an error banner, "Nothing to label right now: every comparison has its votes" and
    "N left for you" at once. Now one card says the campaign is paused and what that means."""
    from annotate.models import Comparison
    from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory

    campaign = CampaignFactory(votes_per_comparison=1)
    task = TaskFactory()
    Comparison.objects.create(
        campaign=campaign,
        task=task,
        trajectory_a=TrajectoryFactory(task=task),
        trajectory_b=TrajectoryFactory(task=task),
    )
    campaign.status = "paused"
    campaign.save(update_fields=["status"])
    client.force_login(UserFactory(roles=["annotator"]))
    page = client.get(f"/annotate/campaigns/{campaign.pk}/label/").content.decode()
    assert 'id="campaign-not-active"' in page and "This campaign is paused" in page
    assert "hands out no comparisons until an admin resumes it" in page
    assert "Nothing to label right now" not in page and "has its votes" not in page and "not active" not in page


def test_the_labeling_page_has_no_inline_script_and_carries_the_correction_steps_in_a_data_attribute(client, annotator):
    """Issue 53: the correction form's steps were a JSON data block inside a <script>; every
    <script> of the page (and of the revise page) now loads a file and holds nothing."""
    campaign = make_campaign(n_comparisons=2, k=1)
    sides = Comparison.objects.filter(campaign=campaign).values("trajectory_a")
    Trajectory.objects.filter(pk__in=sides).update(steps=TOOL_STEPS, num_steps=len(TOOL_STEPS))
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert 'id="correction-form"' in page
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", page, flags=re.S | re.I)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts), scripts
    starts = json.loads(unescape(re.search(r'data-correction-steps="([^"]*)"', page).group(1)))
    calls = [s for side in ("left", "right") for s in starts[side].values() if s["kind"] == "action"]
    assert calls and all(call["tool"] for call in calls)

    assignment = Assignment.objects.get(annotator=annotator)
    judgement, _ = judgement_submit(assignment_id=assignment.id, annotator=annotator, verdict=Verdict(choice=2))
    revise = client.get(f"/annotate/judgements/{judgement.pk}/revise/").content.decode()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", revise, flags=re.S | re.I)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts), scripts
