"""An annotator labels with the keyboard alone; marks a first wrong step; script payloads stay text.

The workbench as annotators use it, at 1440 and 390 px: Enter presses a focused button or fold
and submits elsewhere, ratings kept through a refusal,
step marking by keys, the sticky verdict bar on a long pair, alignment by content (and by
index, kept across submits), identical trajectories flagged, the phone layout, adjudication."""

import io

import pytest

from annotate.models import Assignment, Comparison, Judgement
from annotate.services.imports import trajectories_import_stream
from tests.browser.conftest import login, screenshot
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
from tests.helpers import DETOUR, REJOIN, START, answer, call, seen, thought
from tests.samples import canonical, jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _campaign(n_tasks=3, per_task=2, k=1, dimensions=(), payload=False):
    campaign = CampaignFactory(
        votes_per_comparison=k, dimensions=list(dimensions), guidelines="## Be fair\nPrefer **supported** answers."
    )
    lines = []
    for t in range(n_tasks):
        for n in range(per_task):
            answer = XSS if payload and n == 0 else f"answer {t}-{n}"
            lines.append(canonical(task_id=f"task-{t}", prompt=f"Question {t}?", answer=answer, n=n))
    trajectories_import_stream(stream=io.BytesIO(jsonl(*lines)), campaign=campaign)
    return campaign


def test_keyboard_only_session_records_judgements_with_the_right_side_mapping(page, live_server):
    campaign = _campaign(n_tasks=3)
    ann = UserFactory(username="kb", roles=["annotator"])
    login(page, live_server, "kb")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    pressed = ["1", "4", "3"]
    for i, key in enumerate(pressed):
        assignment_id = int(page.locator("#workbench").get_attribute("data-assignment"))
        if i == 0:
            screenshot(page, "comparison-screen")
        page.keyboard.press(key)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=assignment_id
        )
        assignment = Assignment.objects.get(pk=assignment_id)
        judgement = Judgement.objects.get(assignment=assignment)
        screen = int(key)
        expected = screen if assignment.left_is_a else 6 - screen
        assert judgement.choice == expected, (key, assignment.left_is_a, judgement.choice)
        assert judgement.annotator == ann and judgement.seconds >= 0
    page.wait_for_selector("text=Nothing to label right now")
    assert Judgement.objects.count() == 3
    assert "You judged 3 in this campaign, 3 today" in page.locator("#counter").inner_text()
    assert not page.js_errors


def test_help_skip_and_first_wrong_step(page, live_server):
    campaign = _campaign(n_tasks=2, dimensions=["correctness"])
    UserFactory(username="mk", roles=["annotator"])
    login(page, live_server, "mk")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    assert page.locator("#help h2", has_text="Be fair").count() == 1
    # A centred modal in the page's normal text size, listing the step keys (not Tab and Space).
    box, width = page.locator("#help").bounding_box(), page.viewport_size["width"]
    assert abs(box["x"] - (width - box["x"] - box["width"])) <= 2 and box["y"] > 20
    assert page.locator("#help .keys").evaluate("el => getComputedStyle(el).fontSize") == "15px"
    keys = page.locator("#help .keys").inner_text()
    assert "first wrong step on its side" in keys and "jump to the first difference" in keys
    assert "Tab" not in keys  # marking is w on the cursor's step, not Tab and Space
    screenshot(page, "help-dialog")
    page.keyboard.press("Escape")
    assert not page.locator("#help").is_visible()

    first = int(page.locator("#workbench").get_attribute("data-assignment"))
    page.keyboard.press("s")
    page.keyboard.press("Enter")
    page.wait_for_function("id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=first)
    assert Assignment.objects.get(pk=first).status == "skipped"

    second = int(page.locator("#workbench").get_attribute("data-assignment"))
    page.click(".step[data-side=right][data-index='2'] .step-index")
    assert page.locator(".step[data-side=right][data-index='2']").evaluate(
        "el => el.classList.contains('marked-wrong')"
    )
    screenshot(page, "first-wrong-step")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    assignment = Assignment.objects.get(pk=second)
    judgement = Judgement.objects.get(assignment=assignment)
    marked = judgement.first_wrong_step_b if assignment.left_is_a else judgement.first_wrong_step_a
    other = judgement.first_wrong_step_a if assignment.left_is_a else judgement.first_wrong_step_b
    assert (marked, other) == (2, None)
    assert not page.js_errors


def test_script_payload_in_a_trajectory_renders_as_text_and_does_not_run(page, live_server):
    campaign = _campaign(n_tasks=1, payload=True)
    UserFactory(username="xs", roles=["annotator"])
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, live_server, "xs")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assert page.locator(".answer", has_text="<script>window.__pwned=2</script>").count() == 1
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#workbench img").count() == 0
    screenshot(page, "script-payload-as-text")
    assert dialogs == []


# --- The workbench on long and diverging pairs ----------------------------------------------------


def _pairs_campaign(pairs, *, k=1, dimensions=()):
    """A campaign with one comparison per (steps A, steps B), built from hand-written steps."""
    campaign = CampaignFactory(
        votes_per_comparison=k, dimensions=list(dimensions), guidelines="## Be fair\nPrefer **supported** answers."
    )
    for left, right in pairs:
        task = TaskFactory()
        a, b = TrajectoryFactory(task=task, steps=left), TrajectoryFactory(task=task, steps=right)
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return campaign


def _current(page) -> Assignment:
    return Assignment.objects.select_related("comparison").get(
        pk=int(page.locator("#workbench").get_attribute("data-assignment"))
    )


def _on_screen(assignment: Assignment, judgement: Judgement) -> tuple:
    """(choice, first wrong left, first wrong right) in screen terms, through left_is_a."""
    if assignment.left_is_a:
        return judgement.choice, judgement.first_wrong_step_a, judgement.first_wrong_step_b
    return 6 - judgement.choice, judgement.first_wrong_step_b, judgement.first_wrong_step_a


def _wait_for_next(page, assignment_id):
    page.wait_for_function(
        "id => document.querySelector('#workbench').dataset.assignment !== String(id)", arg=assignment_id
    )


def _long_steps(tag: str, n: int = 60) -> list[dict]:
    """n steps: ten shared with the other side, then this side's own pages, then an answer."""
    steps = []
    for i in range((n - 1) // 2):
        page_name = f"page-{i}" if i < 5 else f"{tag}-{i}"
        steps += [call("open", url=page_name), seen("open", f"{page_name}: " + "Long page text. " * 30)]
    return steps + [thought(f"{tag} is done")] * ((n - 1) % 2) + [answer(f"answer {tag}")]


def _row_of(page, side: str, index: int):
    return page.locator(".pair-row", has=page.locator(f".step[data-side={side}][data-index='{index}']"))


def test_enter_presses_a_focused_button_or_fold_and_submits_elsewhere(page, live_server):
    """Keyboard and screen-reader convention: Enter activates the focused control (Skip opens the
    skip box, a fold opens); with the focus on no control, or with Ctrl/Cmd, Enter submits. A
    pointer click leaves no focus behind, so a mouse user's Enter still submits."""
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)] * 4)
    UserFactory(username="fo", roles=["annotator"])
    login(page, live_server, "fo")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")

    # Tab to Skip, Enter: the skip box opens; nothing is stored.
    first = _current(page)
    page.keyboard.press("3")
    page.focus("#judgement-form button[data-open-skip]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#skip-form:not([hidden])")
    assert not Judgement.objects.filter(assignment=first).exists()
    page.keyboard.press("Escape")  # closes the skip box

    # A fold focused from the keyboard, Enter: it opens; nothing is stored.
    page.keyboard.press("c")  # show the folded identical steps
    summary = page.locator(".step-observation summary").first
    summary.focus()
    page.keyboard.press("Enter")
    assert page.locator(".step-observation details[open]").count() == 1
    assert not Judgement.objects.filter(assignment=first).exists()
    page.keyboard.press("Control+Enter")  # from anywhere: submit
    _wait_for_next(page, first.id)
    assert _on_screen(first, Judgement.objects.get(assignment=first))[0] == 3

    # A mouse click on a fold and on a tool button: no focus stays behind, so Enter submits.
    second = _current(page)
    page.click("button[data-toggle-folds]")
    page.locator(".step-observation summary").first.click()
    page.click("button[data-toggle-observations]")
    assert page.evaluate("document.activeElement === document.body")
    page.keyboard.press("4")
    page.keyboard.press("Enter")
    _wait_for_next(page, second.id)
    assert _on_screen(second, Judgement.objects.get(assignment=second))[0] == 4

    # In the rationale Enter is a new line and Ctrl+Enter submits.
    third = _current(page)
    page.keyboard.press("1")
    page.keyboard.press("r")
    page.keyboard.type("Left cites the page.")
    page.keyboard.press("Enter")
    page.keyboard.type("Right guesses.")
    assert Judgement.objects.filter(assignment=third).count() == 0
    page.keyboard.press("Control+Enter")
    _wait_for_next(page, third.id)
    judgement = Judgement.objects.get(assignment=third)
    assert _on_screen(third, judgement)[0] == 1 and judgement.rationale == "Left cites the page.\nRight guesses."
    assert not page.js_errors


def test_a_refused_submit_keeps_every_rating_and_required_ratings_are_asked_for(page, live_server):
    campaign = _pairs_campaign(
        [(START + REJOIN, START + DETOUR + REJOIN)] * 2,
        dimensions=[
            {"name": "correctness", "scale": 5, "description": "", "required": False},
            {"name": "speed", "scale": 5, "description": "", "required": False},
        ],
    )
    UserFactory(username="ra", roles=["annotator"])
    login(page, live_server, "ra")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    first = _current(page)
    # g goes to the rating menus; a digit rates; Enter moves on, and leaves after the last one.
    page.keyboard.press("g")
    for digit in ("4", "2", "5", "1"):
        page.keyboard.press(digit)
        page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement === document.body")
    page.keyboard.press("Enter")  # no point on the scale yet: refused
    page.wait_for_selector("text=Pick a point on the scale")
    values = page.eval_on_selector_all("table.ratings select", "els => els.map(e => e.value)")
    assert values == ["4", "2", "5", "1"]  # nothing typed is lost
    assert not Judgement.objects.filter(assignment=first).exists()
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    _wait_for_next(page, first.id)
    judgement = Judgement.objects.get(assignment=first)
    left, right = ("A", "B") if first.left_is_a else ("B", "A")
    assert judgement.ratings == {"correctness": {left: 4, right: 2}, "speed": {left: 5, right: 1}}

    # A required dimension: the browser asks for it, and nothing is stored until it is rated.
    campaign.dimensions = [{"name": "correctness", "scale": 5, "description": "", "required": True}]
    campaign.save()
    page.reload()
    second = _current(page)
    assert "required" in page.locator("table.ratings").inner_text()
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    message = page.eval_on_selector("table.ratings select", "e => e.validationMessage")
    assert message, "the browser names the missing rating"
    assert not Judgement.objects.filter(assignment=second).exists()
    page.keyboard.press("Escape")  # the browser put the focus on the missing rating: leave it, then g
    page.keyboard.press("g")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    page.keyboard.press("4")
    page.keyboard.press("Control+Enter")
    _wait_for_next(page, second.id)
    expected = {"A": 3, "B": 4} if second.left_is_a else {"A": 4, "B": 3}
    assert Judgement.objects.get(assignment=second).ratings["correctness"] == expected
    assert not page.js_errors


def test_step_marking_with_keys_stores_each_sides_own_index(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)])
    UserFactory(username="sk", roles=["annotator"])
    login(page, live_server, "sk")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assignment = _current(page)
    cursor = page.locator("#judgement-form .step.cursor")
    marks = page.locator("#verdict-bar .vb-marks")

    page.keyboard.press("l")  # the right side
    assert page.locator("[data-side-tab=right]").get_attribute("aria-pressed") == "true"
    for _ in range(4):
        page.keyboard.press("]")
    assert (cursor.get_attribute("data-side"), cursor.get_attribute("data-index")) == ("right", "3")
    page.keyboard.press("k")  # back one
    assert cursor.get_attribute("data-index") == "2"
    page.keyboard.press("w")
    assert page.locator(".step[data-side=right][data-index='2']").evaluate(
        "el => el.classList.contains('marked-wrong')"
    )

    page.keyboard.press("ArrowLeft")  # the left side: the cursor moves to the same row
    assert (cursor.get_attribute("data-side"), cursor.get_attribute("data-index")) == ("left", "2")
    page.keyboard.press("w")
    assert "left 2 · right 2" in marks.inner_text()
    page.keyboard.press("Escape")  # clears the left mark only
    assert "left – · right 2" in marks.inner_text()
    page.keyboard.press("j")
    page.keyboard.press("w")
    assert "left 3 · right 2" in marks.inner_text()
    screenshot(page, "step-marking-keys")
    page.keyboard.press("5")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    assert _on_screen(assignment, Judgement.objects.get(assignment=assignment)) == (5, 3, 2)
    assert not page.js_errors


def test_the_cursor_opens_a_folded_run_and_w_needs_a_cursor(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)])
    UserFactory(username="fr", roles=["annotator"])
    login(page, live_server, "fr")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    runs = page.locator("details.same-run")
    assert runs.count() == 2 and runs.first.inner_text().startswith("3 identical steps")
    assert not page.locator(".step[data-side=left][data-index='0']").is_visible()
    page.keyboard.press("w")  # nothing under the cursor yet: says so, marks nothing
    assert "press ]" in page.locator("#step-status").inner_text()
    page.keyboard.press("]")
    assert page.locator(".step[data-side=left][data-index='0']").is_visible()
    assert runs.first.evaluate("el => el.open")
    page.keyboard.press("c")  # every run shown, then folded again
    assert runs.evaluate_all("els => els.every(el => el.open)")
    page.keyboard.press("c")
    assert runs.evaluate_all("els => els.every(el => !el.open)")
    assert not page.js_errors


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_the_verdict_bar_stays_in_view_on_a_60_step_pair(page, live_server, width, height):
    campaign = _pairs_campaign([(_long_steps("left"), _long_steps("right"))])
    UserFactory(username="lg", roles=["annotator"])
    page.set_viewport_size({"width": width, "height": height})
    login(page, live_server, "lg")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assignment = _current(page)
    assert page.locator(".pair-head").inner_text().count("60 steps") == 2
    page.keyboard.press("o")  # every observation open: a very long page
    assert page.evaluate("document.documentElement.scrollHeight") > 5 * height
    bar = page.locator("#verdict-bar")

    def in_view():
        box = bar.bounding_box()
        return box["y"] >= 0 and box["y"] + box["height"] <= height + 1 and box["height"] < height / 3

    for where in ("document.documentElement.scrollHeight", "0", "document.documentElement.scrollHeight / 2"):
        page.evaluate(f"window.scrollTo(0, {where})")
        assert in_view(), where
    page.evaluate("window.scrollTo(0, 0)")
    page.keyboard.press("d")  # the first difference scrolls into view
    marker = page.locator("#first-difference").bounding_box()
    assert 0 <= marker["y"] < height / 2
    assert "Left step 10 · Right step 10" in page.locator("#first-difference").inner_text()
    assert page.locator(".step.cursor").get_attribute("data-index") == "10"
    assert in_view()
    page.keyboard.press("o")  # collapse them all again
    assert page.locator(".step-observation details[open]").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"labeling-long-pair-{width}")
    page.locator("label.scale-point", has=page.locator("input[value='4']")).click()
    page.locator("#verdict-bar button[type=submit]").click()
    page.wait_for_selector("text=Nothing to label right now")
    assert _on_screen(assignment, Judgement.objects.get(assignment=assignment))[0] == 4
    assert not page.js_errors


def test_alignment_by_content_rejoins_after_a_detour_and_index_alignment_survives_submit(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)] * 2)
    UserFactory(username="al", roles=["annotator"])
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, live_server, "al")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    page.keyboard.press("c")
    first = _current(page)
    detour, direct = ("left", "right") if not first.left_is_a else ("right", "left")  # B took the detour

    def partner(side, index, other):
        cell = _row_of(page, side, index).locator(f".step[data-side={other}]")
        return cell.get_attribute("data-index") if cell.count() else None

    # By content: the direct side's step 3 sits beside the detour side's step 5; the detour has gaps.
    assert page.locator(".pair").get_attribute("data-align") == "content"
    assert partner(direct, 3, detour) == "5" and partner(direct, 5, detour) == "7"
    assert partner(detour, 3, direct) is None and partner(detour, 4, direct) is None
    assert _row_of(page, detour, 3).get_attribute("class").split()[1] == f"row-{detour}-only"
    marker = page.locator("#first-difference").inner_text()
    assert f"{detour.title()} step 3" in marker and f"{direct.title()} no step" in marker
    screenshot(page, "labeling-1440-alignment-by-content")

    page.keyboard.press("a")  # by index, in the URL
    page.wait_for_selector(".pair[data-align=index]")
    page.wait_for_url("**align=index")
    assert partner(direct, 3, detour) == "3"
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    _wait_for_next(page, first.id)
    assert page.locator(".pair").get_attribute("data-align") == "index"  # kept after the submit
    assert page.locator("a[data-align-toggle]").inner_text().startswith("Align by content")
    assert Judgement.objects.get(assignment=first).choice == 3
    page.click("a[data-align-toggle]")
    page.wait_for_selector(".pair[data-align=content]")
    assert not page.js_errors


def test_identical_trajectories_are_flagged_and_skip_offers_the_reason(page, live_server):
    same = START + REJOIN
    campaign = _pairs_campaign([(same, [dict(s) for s in same])])
    UserFactory(username="id", roles=["annotator"])
    login(page, live_server, "id")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assignment = _current(page)
    banner = page.locator("#identical-banner")
    assert banner.is_visible() and "Identical trajectories" in banner.inner_text()
    assert page.locator("button[data-jump-diff]").is_disabled()
    assert page.locator("details.same-run > summary").inner_text().startswith("6 identical steps")
    screenshot(page, "identical-trajectories")
    banner.locator("button[data-open-skip]").click()
    assert page.locator("#skip-form select").input_value() == "Identical trajectories"
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    assignment.refresh_from_db()
    assert (assignment.status, assignment.skip_reason) == ("skipped", "Identical trajectories")
    assert not page.js_errors


def test_the_phone_layout_stacks_one_side_at_a_time_with_a_switcher(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)], dimensions=["correctness"])
    UserFactory(username="ph", roles=["annotator"])
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, live_server, "ph")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    assignment = _current(page)
    page.keyboard.press("c")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    left, right = (page.locator(f".step[data-side={s}][data-index='5']") for s in ("left", "right"))
    assert left.is_visible() and not right.is_visible()
    assert left.bounding_box()["width"] > 300  # one full-width column, not two squeezed ones
    screenshot(page, "labeling-390-left")
    page.click("[data-side-tab=right]")
    assert right.is_visible() and not left.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "labeling-390-right")
    page.keyboard.press("h")
    assert left.is_visible() and not right.is_visible()
    page.keyboard.press("l")
    bar = page.locator("#verdict-bar").bounding_box()
    assert bar["y"] + bar["height"] <= 845 and bar["y"] > 844 / 2  # at the bottom, under the thumb
    page.locator("label.scale-point", has=page.locator("input[value='5']")).click()
    page.locator("#verdict-bar button[type=submit]").click()
    page.wait_for_selector("text=Nothing to label right now")
    assert _on_screen(assignment, Judgement.objects.get(assignment=assignment))[0] == 5
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert not page.js_errors


def test_the_counter_moves_as_the_annotator_labels(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)] * 3, k=3)
    UserFactory(username="ct", roles=["annotator"])
    login(page, live_server, "ct")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    for done in range(3):
        assert f"{3 - done} left for you" in page.locator("#counter").inner_text()
        assert f"{done} today" in page.locator("#counter").inner_text()
        current = _current(page)
        page.keyboard.press("3")
        page.keyboard.press("Enter")
        if done < 2:
            _wait_for_next(page, current.id)
    page.wait_for_selector("text=Nothing to label right now")
    assert "3 today · 0 left for you" in page.locator("#counter").inner_text()


def test_enter_pressed_the_moment_the_next_comparison_appears_still_swaps(page, live_server):
    """htmx wires new content after its settle delay; a key in that moment must not post natively."""
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)] * 6, k=1)
    UserFactory(username="fast", roles=["annotator"])
    login(page, live_server, "fast")
    page.goto(f"{live_server.url}/annotate/campaigns/{campaign.id}/label/")
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    for done in range(5):
        current = _current(page)
        page.keyboard.press("2")
        page.keyboard.press("Enter")
        _wait_for_next(page, current.id)  # and at once the next verdict, inside the settle delay
    assert navigations == [] and Judgement.objects.count() == 5


def test_adjudication_without_a_pick_is_refused(page, live_server):
    campaign = _pairs_campaign([(START + REJOIN, START + DETOUR + REJOIN)], k=2)
    comparison = campaign.comparisons.get()
    UserFactory(username="boss", roles=["admin"])
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}/annotate/comparisons/{comparison.id}/")
    choice = page.locator("form.adjudicate select[name=choice]")
    assert choice.input_value() == ""
    page.click("form.adjudicate button:has-text('Record')")
    assert choice.evaluate("el => !el.validity.valid")  # the browser asks for a pick
    comparison.refresh_from_db()
    assert comparison.adjudicated_choice is None
    choice.select_option("4")
    page.click("form.adjudicate button:has-text('Record')")
    page.wait_for_selector(".messages .msg-success")
    comparison.refresh_from_db()
    assert comparison.adjudicated_choice == 4
    assert not page.js_errors
