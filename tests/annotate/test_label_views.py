"""The comparison screen over plain HTTP: fragments, refusals, escaping, guidelines."""
import pytest

from annotate.models import Assignment, Judgement
from tests.annotate.test_assignments import make_campaign
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
    assert "You judged 1" in page
    assert Judgement.objects.get().choice == 3


def test_missing_choice_keeps_the_same_comparison_with_a_message(client, annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    client.force_login(annotator)
    first = _assignment(client, campaign)
    response = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": ""}, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert "Pick a point on the scale" in page and f'data-assignment="{first.id}"' in page
    plain = client.post(f"/annotate/assignments/{first.id}/judgement/", {"choice": "9"})
    assert plain.status_code == 400 and "The scale runs from 1 to 5" in plain.content.decode()
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
    trajectory.steps = [{"kind": "thought", "text": "<script>alert(1)</script>"},
                        {"kind": "answer", "text": "<b>bold</b>", "quotes": ["<i>q</i>"]}]
    trajectory.save()
    client.force_login(annotator)
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def test_guidelines_markdown_is_sanitized():
    html = markdown_safe('## Rules\n<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)> **ok**')
    assert "<h2>Rules</h2>" in html and "<strong>ok</strong>" in html
    assert "<script" not in html and "javascript:" not in html and "onerror" not in html and "<img" not in html


def test_quality_page_shows_agreement_and_charts(client, researcher):
    campaign = make_campaign(n_comparisons=1, k=1)
    client.force_login(researcher)
    page = client.get(f"/annotate/campaigns/{campaign.id}/quality/").content.decode()
    assert "Krippendorff" in page and "Judgements per day" in page
