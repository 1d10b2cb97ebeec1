"""The two paths of the labeling API answer alike: the short path (annotate/api_fast.py, a token
and a JSON body) and the DRF view (annotate/api.py; reached here by a client logged in without a
token, which the short path hands over). One corpus of good and hostile judgement bodies, and of
odd `?campaign=` values for the next assignment, goes through both paths: each answer must
have the same status and the same JSON, and none is a 5xx.

Only what differs by nature is set aside: a judgement's id, time and seconds on task, an
assignment's id and lease end. Both annotators hold a lease on the same comparison with the
same sides, so everything else (A/B terms included) must be equal.
"""

from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from annotate.models import Assignment, Campaign, Judgement
from annotate.services.assignments import assignment_next, assignment_skip
from core import json_input
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db

CORRECTNESS = {"name": "correctness", "scale": 5, "description": "", "required": False}
FULL = (
    '{"choice": 1, "both_bad": true, "ratings": {"correctness": {"left": 5, "right": 1}}, '
    '"first_wrong_step_left": 0, "first_wrong_step_right": null, "rationale": "  cites its page \\n"}'
)

# name: the body as JSON text, sent as it is (what json.dumps cannot write included).
GOOD = {
    "choice only": '{"choice": 3}',
    "every field": FULL,
    "numbers and flags as text": '{"choice": "4", "both_bad": "false", "ratings": {"correctness": {"right": "2"}}, '
    '"first_wrong_step_right": "0"}',
    "an unknown field is ignored": '{"choice": 2, "mood": "fine"}',
    "empty and null fields left out": '{"choice": 5, "both_bad": null, "ratings": {"correctness": {"left": null}}, '
    '"first_wrong_step_left": "", "rationale": null}',
}
HOSTILE = {
    # not an object, or not JSON
    "empty body": "",
    "list": "[]",
    "list of a judgement": '[{"choice": 3}]',
    "string": '"x"',
    "null": "null",
    "number": "1",
    "true": "true",
    "empty object": "{}",
    "cut short": '{"choice": 3',
    "NaN": '{"choice": NaN}',
    "1e400": '{"choice": 1e400}',
    "NUL": '{"choice": 3, "rationale": "a\\u0000b"}',
    "lone surrogate": '{"choice": 3, "rationale": "\\ud800"}',
    "deep": '{"choice": 3, "ratings": ' + "[" * 200 + "]" * 200 + "}",
    # choice
    "choice null": '{"choice": null}',
    "choice empty text": '{"choice": ""}',
    "choice 0": '{"choice": 0}',
    "choice 6": '{"choice": 6}',
    "choice -1": '{"choice": -1}',
    "choice 2.5": '{"choice": 2.5}',
    "choice 2.0": '{"choice": 2.0}',
    "choice true": '{"choice": true}',
    "choice text": '{"choice": "one"}',
    "choice superscript two": '{"choice": "²"}',
    "choice list": '{"choice": [3]}',
    "choice object": '{"choice": {"value": 3}}',
    "choice 2**63": '{"choice": 9223372036854775808}',
    # both_bad
    "both_bad text": '{"choice": 3, "both_bad": "maybe"}',
    "both_bad number": '{"choice": 3, "both_bad": 1}',
    "both_bad list": '{"choice": 3, "both_bad": []}',
    # ratings, at every level
    "ratings list": '{"choice": 3, "ratings": []}',
    "ratings text": '{"choice": 3, "ratings": "correctness=5"}',
    "ratings number": '{"choice": 3, "ratings": 5}',
    "dimension as list": '{"choice": 3, "ratings": {"correctness": [5, 1]}}',
    "dimension as text": '{"choice": 3, "ratings": {"correctness": "5"}}',
    "rating as object": '{"choice": 3, "ratings": {"correctness": {"left": {}}}}',
    "rating as list": '{"choice": 3, "ratings": {"correctness": {"left": [5]}}}',
    "rating as true": '{"choice": 3, "ratings": {"correctness": {"left": true}}}',
    "rating over the scale": '{"choice": 3, "ratings": {"correctness": {"left": 9}}}',
    "rating over any scale": '{"choice": 3, "ratings": {"correctness": {"left": 11}}}',
    "rating 0": '{"choice": 3, "ratings": {"correctness": {"left": 0}}}',
    "rating 2.5": '{"choice": 3, "ratings": {"correctness": {"left": 2.5}}}',
    "unknown side": '{"choice": 3, "ratings": {"correctness": {"up": 3}}}',
    "unknown dimension": '{"choice": 3, "ratings": {"nope": {"left": 3}}}',
    # first wrong steps
    "step text": '{"choice": 3, "first_wrong_step_left": "x"}',
    "step -1": '{"choice": 3, "first_wrong_step_left": -1}',
    "step 2**31": '{"choice": 3, "first_wrong_step_right": 2147483648}',
    "step 2**63": '{"choice": 3, "first_wrong_step_right": 9223372036854775808}',
    "step 1.5": '{"choice": 3, "first_wrong_step_left": 1.5}',
    "step list": '{"choice": 3, "first_wrong_step_left": [0]}',
    "step object": '{"choice": 3, "first_wrong_step_left": {"index": 0}}',
    "step true": '{"choice": 3, "first_wrong_step_left": true}',
    "step beyond the trajectory": '{"choice": 3, "first_wrong_step_left": 99}',
    # rationale
    "rationale number": '{"choice": 3, "rationale": 5}',
    "rationale list": '{"choice": 3, "rationale": ["why"]}',
    "rationale object": '{"choice": 3, "rationale": {"text": "why"}}',
    "rationale too long": '{"choice": 3, "rationale": "' + "x" * 20_001 + '"}',
    # several problems at once
    "everything wrong": '{"choice": "x", "both_bad": {}, "ratings": {"correctness": {"left": []}, "nope": 1}, '
    '"first_wrong_step_left": [], "first_wrong_step_right": -2, "rationale": false}',
}
# On a campaign that requires a rationale and a rating of correctness on both sides.
STRICT = {
    "without the required": '{"choice": 3}',
    "one side rated": '{"choice": 3, "ratings": {"correctness": {"left": 2}}, "rationale": "why"}',
    "invisible rationale": '{"choice": 3, "ratings": {"correctness": {"left": 2, "right": 4}}, '
    '"rationale": "\\u200b \\u2060"}',
    "all given": '{"choice": 3, "ratings": {"correctness": {"left": 2, "right": 4}}, "rationale": "why"}',
}
VOLATILE = ("id", "created_at", "seconds", "leased_until")


def _world(**campaign_settings) -> tuple[Campaign, dict]:
    """A campaign whose one comparison is leased by two annotators with the same sides:
    {"short path": (client, lease id), "DRF view": (client, lease id)}."""
    campaign = make_campaign(n_comparisons=1, k=2, **{"dimensions": [CORRECTNESS], **campaign_settings})
    fast_user, drf_user = UserFactory(roles=["annotator"]), UserFactory(roles=["annotator"])
    drf = APIClient()
    drf.force_authenticate(drf_user)
    paths = {
        "short path": (token_client(fast_user), assignment_next(campaign=campaign, annotator=fast_user).pk),
        "DRF view": (drf, assignment_next(campaign=campaign, annotator=drf_user).pk),
    }
    Assignment.objects.filter(pk__in=[lease for _, lease in paths.values()]).update(left_is_a=True)
    return campaign, paths


def _answer(response) -> tuple[int, object]:
    """Status and JSON body, volatile fields set aside; never a 5xx, always JSON when there is a body."""
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 204:
        return 204, None
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    return response.status_code, {k: v for k, v in body.items() if k not in VOLATILE}


def _decodes(text: str) -> bool:
    try:
        json_input.loads(text.encode("utf-8", "surrogatepass"))
    except json_input.JsonInputError:
        return False
    return True


def _post(client, lease: int, text: str):
    return client.generic(
        "POST",
        f"/api/v1/assignments/{lease}/judgement",
        text.encode("utf-8", "surrogatepass"),
        content_type="application/json",
    )


def _both(paths: dict, text: str, *, to=None) -> dict:
    """Each path's answer to `text`, posted to its own lease (or to `to`'s, a path name)."""
    return {name: _answer(_post(client, paths[to or name][1], text)) for name, (client, _) in paths.items()}


@pytest.mark.parametrize("name", list(GOOD) + list(HOSTILE))
def test_a_body_gets_the_same_answer_on_both_paths(handed_over, name):
    text = {**GOOD, **HOSTILE}[name]
    _, paths = _world()
    answers = _both(paths, text)
    assert answers["short path"] == answers["DRF view"]
    status, body = answers["short path"]
    assert status == (201 if name in GOOD else 400), body
    if name in GOOD:
        assert Judgement.objects.count() == 2
    else:
        assert Judgement.objects.count() == 0 and body["detail"]
    # The DRF view answered its own request; the short path answered every body it could decode.
    assert len(handed_over) == (1 if _decodes(text) else 2), handed_over


def test_what_a_good_body_stores_is_the_same_on_both_paths():
    _, paths = _world()
    answers = _both(paths, FULL)
    assert answers["short path"] == answers["DRF view"]
    _, body = answers["short path"]
    # Left is A on both leases: the verdict in A/B terms, the rationale trimmed.
    assert (body["choice"], body["both_bad"], body["first_wrong_step_a"], body["first_wrong_step_b"]) == (
        1,
        True,
        0,
        None,
    )
    assert body["ratings"] == {"correctness": {"A": 5, "B": 1}} and body["rationale"] == "cites its page"


@pytest.mark.parametrize("name", list(STRICT))
def test_what_the_campaign_asks_is_refused_alike(name):
    _, paths = _world(rationale_required=True, dimensions=[{**CORRECTNESS, "required": True}])
    answers = _both(paths, STRICT[name])
    assert answers["short path"] == answers["DRF view"]
    assert answers["short path"][0] == (201 if name == "all given" else 400)


@pytest.mark.parametrize(
    "situation", ["repeat", "someone else's lease", "skipped", "archived", "out of the pool", "no such assignment"]
)
def test_a_good_body_in_a_bad_situation_gets_the_same_answer(situation):
    campaign, paths = _world()
    to = None
    if situation == "repeat":
        _both(paths, FULL)
    elif situation == "someone else's lease":
        to = {"short path": "DRF view", "DRF view": "short path"}
    elif situation == "skipped":
        for _, lease in paths.values():
            assignment_skip(assignment_id=lease, annotator=Assignment.objects.get(pk=lease).annotator, reason="x")
    elif situation == "archived":
        Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ARCHIVED)
    elif situation == "out of the pool":
        Campaign.objects.filter(pk=campaign.pk).update(pool_only=True)
    else:
        Assignment.objects.all().delete()
    if isinstance(to, dict):
        answers = {name: _answer(_post(client, paths[to[name]][1], FULL)) for name, (client, _) in paths.items()}
    else:
        answers = _both(paths, FULL)
    assert answers["short path"] == answers["DRF view"]
    status, body = answers["short path"]
    assert status == {"repeat": 200, "out of the pool": 403}.get(situation, 400), body


# " {id}" and "{id}.0" are not ids (core.ids): refused on both paths, as by every other reader.
REFUSED_CAMPAIGNS = ["²", "٣", "1e3", "-1", "0", "", "9" * 30, "\x00", "abc", "424242", "{id}x", "{id}.0", " {id}"]
# Answered with the campaign ({id}: its id) on both paths.
TAKEN_CAMPAIGNS = ["{id}", "0{id}"]


@pytest.mark.parametrize("value", REFUSED_CAMPAIGNS + TAKEN_CAMPAIGNS)
def test_the_next_assignment_gets_the_same_answer_on_both_paths(value):
    campaign, paths = _world()
    query = f"campaign={quote(value.format(id=campaign.pk))}"
    answers = {name: _answer(client.get(f"/api/v1/assignments/next?{query}")) for name, (client, _) in paths.items()}
    assert answers["short path"] == answers["DRF view"]
    assert answers["short path"][0] == (400 if value in REFUSED_CAMPAIGNS else 200), answers["short path"]


def test_the_campaign_named_twice_or_with_another_parameter_gets_the_same_answer():
    campaign, paths = _world()
    for query in (f"campaign={campaign.pk}&campaign={campaign.pk}", f"campaign={campaign.pk}&x=1", "x=1"):
        answers = {
            name: _answer(client.get(f"/api/v1/assignments/next?{query}")) for name, (client, _) in paths.items()
        }
        assert answers["short path"] == answers["DRF view"], query
        assert answers["short path"][0] == (400 if query == "x=1" else 200), query


def test_a_missing_campaign_gets_the_same_answer_on_both_paths():
    _, paths = _world()
    answers = {name: _answer(client.get("/api/v1/assignments/next")) for name, (client, _) in paths.items()}
    assert answers["short path"] == answers["DRF view"] and answers["short path"][0] == 400
