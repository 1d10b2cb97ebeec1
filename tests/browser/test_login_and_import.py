"""A person logs in, sees their role's home page, and an admin imports a file."""

import pytest

from annotate.models import Trajectory
from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from tests.samples import canonical, jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_annotator_logs_in_and_sees_only_the_annotator_card(page, live_server):
    UserFactory(username="ann", roles=["annotator"])
    login(page, live_server, "ann")
    assert page.locator(".role-annotator").is_visible()
    assert page.locator(".role-admin").count() == 0
    screenshot(page, "home-annotator")
    page.click("text=Log out")
    page.wait_for_url(f"{live_server.url}/login/")
    assert not page.js_errors


def test_admin_imports_a_file_with_a_script_payload_and_nothing_runs(page, live_server, tmp_path):
    UserFactory(username="adm", roles=["admin"])
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(canonical(n=0), canonical(n=1)) + b'{"schema": "<img src=x onerror=alert(1)>"}\n')
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, live_server, "adm")
    page.click("a:has-text('Import trajectories')")
    page.wait_for_url(f"{live_server.url}/annotate/imports/")
    page.set_input_files("input[type=file]", str(path))
    page.click("button:has-text('Import')")
    page.wait_for_selector("text=Nothing was imported")
    assert page.locator("table.errors td", has_text="<img src=x onerror=alert(1)>").count() == 1
    screenshot(page, "import-rejected")
    assert dialogs == [] and Trajectory.objects.count() == 0

    path.write_bytes(jsonl(canonical(n=0), canonical(n=1)))
    page.goto(f"{live_server.url}/annotate/imports/")
    page.set_input_files("input[type=file]", str(path))
    page.click("button:has-text('Import')")
    page.wait_for_selector("text=Imported 2 trajectories")
    screenshot(page, "import-succeeded")
    assert Trajectory.objects.count() == 2
    assert not page.js_errors
