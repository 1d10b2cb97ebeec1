"""An admin invites a person on the Users page; the person sets their password through the link and logs in."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_invites_someone_who_sets_a_password_and_logs_in(page, live_server, browser):
    UserFactory(username="adm", roles=["admin"])
    UserFactory(username="simulated-1", roles=["annotator"], is_synthetic=True)
    login(page, live_server, "adm")
    page.click("nav >> text=Users")
    page.wait_for_url(f"{live_server.url}/team/users/")
    page.fill("input[name=username]", "dana")
    page.fill("input[name=email]", "dana@example.org")
    page.check("input[name=roles][value=annotator]")
    page.click("button:has-text('Add the user')")
    page.wait_for_selector("text=Their set-password link")
    link = page.locator("code.token-key").inner_text()
    screenshot(page, "users-invited")
    page.click("text=← Users")
    expect(page.locator("tr", has_text="dana").locator("text=no password")).to_have_count(1)
    assert page.locator("tr", has_text="simulated-1").locator(".tag", has_text="synthetic").count() == 1
    screenshot(page, "users-list")

    invitee = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    invitee.goto(link)
    invitee.wait_for_url("**/set-password/")
    invitee.fill("input[name=new_password1]", "short")
    invitee.fill("input[name=new_password2]", "short")
    invitee.click("button:has-text('Set my password')")
    invitee.wait_for_selector("text=This password is too short")
    screenshot(invitee, "users-set-password-refused")
    invitee.fill("input[name=new_password1]", "orchid-lagoon-63")
    invitee.fill("input[name=new_password2]", "orchid-lagoon-63")
    invitee.click("button:has-text('Set my password')")
    invitee.wait_for_selector("text=Password set")
    invitee.click("text=Log in")
    login(invitee, live_server, "dana", "orchid-lagoon-63")
    assert invitee.locator(".role-annotator").is_visible()
    invitee.context.close()
    assert not page.js_errors
