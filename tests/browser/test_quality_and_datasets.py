"""An admin reads a campaign's quality page and a researcher creates and opens a dataset."""

import pytest

from annotate.models import DatasetSnapshot
from tests.annotate.dataset_fixtures import voted_campaign
from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_quality_page_shows_agreement_annotators_and_charts(page, live_server):
    campaign, _ = voted_campaign([[1, 2, 4], [5, 5, 4], [3, 1, 1], [2, 2, 5]])
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/quality/")
    assert page.locator("#alpha").inner_text() != "–"
    assert page.locator("#annotators tbody tr").count() == 3
    assert page.locator("svg.chart").count() == 3
    screenshot(page, "quality")
    assert not page.js_errors


def test_researcher_creates_a_snapshot_and_sees_its_hash_and_downloads(page, live_server):
    campaign, _ = voted_campaign([[1, 1], [5, 4], [2, 2]])
    UserFactory(username="rita", roles=["researcher"])
    login(page, live_server, "rita")
    page.click("a:has-text('Datasets')")
    page.fill("input[name=name]", "first snapshot")
    # Campaigns are ticked (a filter box narrows the list), dates are picked from a calendar input.
    page.get_by_label("Filter Campaigns").fill(campaign.name)
    page.locator("#field-campaigns label.check", has_text=campaign.name).click()
    assert page.locator("input[name=date_from]").get_attribute("type") == "date"
    page.click("button:has-text('Create snapshot')")
    page.wait_for_selector("#content-hash")
    snapshot = DatasetSnapshot.objects.get(name="first snapshot")
    assert page.locator("#content-hash").inner_text() == snapshot.content_hash
    from annotate.export_schemas import FILETYPES, FORMATS

    assert page.locator("table.downloads a").count() == len(FORMATS) * len(FILETYPES)
    screenshot(page, "dataset")
    assert not page.js_errors
