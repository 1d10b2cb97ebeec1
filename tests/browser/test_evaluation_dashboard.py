"""An admin reads a before/after evaluation in Chromium: the table and the PPO curves, a blind
human evaluation built from the page, and the two systems' trajectories side by side."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from tests.helpers import Built
from training.models import HumanEvaluation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_shows_the_table_the_curves_and_trajectories_side_by_side(page, live_server):
    built = Built()
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.click("nav a:has-text('Evaluations')")
    page.click("a:has-text('bc vs ppo')")

    # The click only starts the navigation: wait for the new page's table, as a person would.
    expect(page.locator("#metrics-sampled tbody tr")).to_have_count(3)
    ppo_row = page.locator(f"#system-{built.ppo.pk}-sampled")
    assert "75.0% [50.0, 100.0]" in ppo_row.inner_text() and "+50.0 pts" in ppo_row.inner_text()
    assert page.locator("#metrics-greedy tbody tr").count() == 2
    curves = page.locator("#curves")
    assert curves.locator("svg.chart").count() == 3 and curves.locator("svg.chart polyline").count() == 3
    assert curves.locator("svg.chart line.marker").count() == 3
    assert curves.locator(".overoptimization").is_visible()
    # The three curves sit side by side on one row.
    boxes = [curves.locator("svg.chart").nth(i).bounding_box() for i in range(3)]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and len({round(b["y"]) for b in boxes}) == 1
    screenshot(page, "evaluation-dashboard")

    # A blind human evaluation, built from the page.
    page.select_option("#human-evaluation-form select[name=candidate]", str(built.ppo.pk))
    page.fill("#human-evaluation-form input[name=votes_per_comparison]", "2")
    page.click("button:has-text('Build a blind campaign')")
    page.wait_for_selector(".messages .msg-success")
    assert "3 comparisons (1 identical pairs left out)" in page.locator(".messages").inner_text()
    assert "no votes yet" in page.locator("#human-evaluations").inner_text()
    assert HumanEvaluation.objects.get().candidate == built.ppo

    # Side by side, then only the tasks where the outcome differs.
    ppo_row.locator("a:has-text('side by side')").click()
    page.wait_for_selector(".task-pair")
    assert page.locator(".task-pair").count() == 4
    first = page.locator(".task-pair").first
    assert first.locator(".pair-head").last.inner_text().split("·")[0].strip() == "bc@1 (start)"
    left, right = (first.locator(f".step[data-side={side}]").first.bounding_box() for side in ("left", "right"))
    assert left["x"] + left["width"] <= right["x"] and round(left["y"]) == round(right["y"])
    page.select_option("select[name=differ]", "1")
    page.click("#compare-filters button:has-text('Show')")
    page.wait_for_url("**differ=1**")
    assert page.locator(".task-pair").count() == 2
    assert "2 of 4 tasks differ in outcome" in page.locator("#compare-summary").inner_text()
    assert page.locator(".task-pair .tag:has-text('outcome differs')").count() == 2
    screenshot(page, "evaluation-compare")
    assert not page.js_errors
