"""A researcher reads what changed in behaviour (issue 54): the evaluation page's panel, per habit
situation, then the tasks of one situation side by side with where the two episodes part."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from tests.training.behaviour_fixtures import stored_evaluation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_panel_leads_from_a_situation_to_the_first_difference_of_its_tasks(page, live_server):
    stored = stored_evaluation()
    UserFactory(username="reader", roles=["researcher"])
    login(page, live_server, "reader")
    page.click("nav a:has-text('Evaluations')")
    page.click("a:has-text('habits before/after')")

    panel = page.locator("#behaviour")
    expect(panel.locator("h2")).to_have_text("What changed in behaviour")
    employer = panel.locator("#situation-decoy_on_top")
    expect(employer.locator("tr")).to_have_count(3)  # the start, filtered behaviour cloning, the start at its best T
    words = employer.inner_text()
    assert "opens the top result" in words and "62.5%" in words and "n = 4" in words
    assert "behaviour cloning, successful demonstrations only (filtered)" in words
    screenshot(page, "behaviour-panel")

    employer.locator("tr", has_text="bc-filtered@1").locator("a:has-text('side by side in this situation')").click()
    page.wait_for_url("**situation=decoy_on_top**")
    expect(page.locator("#compare-summary")).to_contain_text("3 of 4 tasks differ in outcome")
    expect(page.locator(".task-pair")).to_have_count(3)
    first = page.locator(".task-pair").first
    marks = first.locator(".first-divergence")
    expect(marks).to_have_count(2)  # one on each side
    assert marks.nth(0).inner_text() == "first difference: step 4, answer “Acme Glassworks”"
    assert marks.nth(1).inner_text() == "first difference: step 4, search(Acme Glassworks)"
    left, right = (marks.nth(i).bounding_box() for i in range(2))
    assert left["x"] + left["width"] <= right["x"]  # side by side, the start's on the left
    expect(first.locator(".pair-row.first-diff")).to_have_count(1)
    assert page.locator("select[name=situation]").input_value() == "decoy_on_top"
    screenshot(page, "behaviour-first-difference")

    # Another situation from the filter: the same steps on both sides, nothing marked.
    page.select_option("select[name=situation]", "headquarters_first_page")
    page.select_option("select[name=differ]", "0")
    page.click("#compare-filters button:has-text('Show')")
    page.wait_for_url("**situation=headquarters_first_page**")
    expect(page.locator(".task-pair")).to_have_count(len(stored.tasks["headquarters_first_page"]))
    expect(page.locator(".first-divergence")).to_have_count(0)
    expect(page.locator(".same-steps")).to_have_count(3)
    assert not page.js_errors
