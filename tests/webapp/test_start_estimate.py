"""Issue 53: the default policy's training time is one figure (webapp/estimates.py), said by the
home page and the README alike; the home page said "15-25 minutes" where the README said 6.5."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.factories import CampaignFactory, UserFactory
from webapp.estimates import DEFAULT_POLICY_TRAINING
from webapp.models import Run


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text))


def test_the_readme_says_the_figure():
    assert DEFAULT_POLICY_TRAINING in _words((ROOT / "README.md").read_text())


@pytest.mark.django_db
def test_the_home_page_says_the_same_figure_while_the_default_policy_trains(client):
    campaign = CampaignFactory(name="Demo: encyclopedia QA")
    Run.objects.create(
        kind="bc",
        name="Policy default-bc (behaviour cloning)",
        status="queued",
        config={"policy_name": "default-bc", "rollout_campaign_id": campaign.pk},
    )
    client.force_login(UserFactory(roles=["annotator"]))
    page = _words(client.get("/").content.decode())
    assert f"the default policy takes {DEFAULT_POLICY_TRAINING}" in page
    assert "15-25" not in page
