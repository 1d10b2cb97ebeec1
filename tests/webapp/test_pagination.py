"""Every API list pages the same way (webapp/pagination.py): `next` and `previous` links, a
`page_size` of 1 to 200 (default 50), a fixed order by id, and a 400 for any paging value
the API did not write."""

from __future__ import annotations

import math
from base64 import b64encode
from urllib.parse import urlencode

import pytest

from tests.conftest import api_rows, token_client
from tests.factories import CampaignFactory, TrajectoryFactory, UserFactory
from tests.helpers import make_campaign
from webapp.pagination import MAX_PAGE_SIZE, PAGE_SIZE

pytestmark = pytest.mark.django_db
N = 5  # rows made for each list: three pages of two


def _runs(users):
    from webapp.models import Run

    for _ in range(N):
        Run.objects.create(kind="rollout", status="failed", config={})
    return token_client(users["researcher"]), "/api/v1/runs/", Run.objects.order_by("-id")


def _runs_filtered(users):
    from webapp.models import Run

    for i in range(N * 2):
        Run.objects.create(kind="rollout", status="failed" if i % 2 else "succeeded", config={})
    return (
        token_client(users["researcher"]),
        "/api/v1/runs/?status=failed",
        Run.objects.filter(status="failed").order_by("-id"),
    )


def _datasets(users):
    from annotate.models import DatasetSnapshot

    for i in range(N):
        DatasetSnapshot.objects.create(name=f"d{i}")
    return token_client(users["researcher"]), "/api/v1/datasets/", DatasetSnapshot.objects.order_by("-id")


def _campaigns(users):
    from annotate.models import Campaign

    CampaignFactory.create_batch(N)
    return (
        token_client(users["researcher"]),
        "/api/v1/campaigns/",
        Campaign.objects.exclude(status=Campaign.Status.ARCHIVED).order_by("-id"),
    )


def _fills(users):
    from annotate.models import CampaignFill

    campaign = CampaignFactory()
    for _ in range(N):
        CampaignFill.objects.create(campaign=campaign, strategy="all_pairs")
    return token_client(users["admin"]), f"/api/v1/campaigns/{campaign.pk}/fills/", campaign.fills.order_by("-id")


def _judgements(users, n=N):
    from annotate.models import Comparison, Judgement

    campaign = make_campaign(n_comparisons=1, k=n)
    comparison = Comparison.objects.get(campaign=campaign)
    for annotator in UserFactory.create_batch(n, roles=["annotator"]):
        Judgement.objects.create(comparison=comparison, annotator=annotator, choice=2)
    return (
        token_client(users["researcher"]),
        f"/api/v1/campaigns/{campaign.pk}/judgements",
        Judgement.objects.filter(comparison__campaign=campaign).order_by("id"),
    )


def _judges(users):
    from annotate.models import Judge

    for i in range(N):
        Judge.objects.create(name=f"judge-{i}", kind="rubric")
    return token_client(users["researcher"]), "/api/v1/judges/", Judge.objects.order_by("-id")


def _judge_votes(users):
    from annotate.models import Comparison, Judge, JudgeVote

    campaign = make_campaign(n_comparisons=N)
    judge = Judge.objects.create(name="rubric", kind="rubric")
    for comparison in Comparison.objects.filter(campaign=campaign):
        JudgeVote.objects.create(judge=judge, comparison=comparison, choice=2)
    return (
        token_client(users["researcher"]),
        f"/api/v1/campaigns/{campaign.pk}/judge-votes",
        JudgeVote.objects.filter(comparison__campaign=campaign).order_by("id"),
    )


def _judge_calls(users):
    from annotate.models import Judge, JudgeCall

    judge = Judge.objects.create(name="chat", kind="chat")
    for _ in range(N):
        JudgeCall.objects.create(judge=judge, status="ok")
    return token_client(users["admin"]), f"/api/v1/judges/{judge.pk}/calls", judge.calls.order_by("-id")


def _corrections(users):
    from annotate.models import Correction

    author = UserFactory(roles=["annotator"])
    for _ in range(N):
        original = TrajectoryFactory()
        corrected = TrajectoryFactory(task=original.task)
        Correction.objects.create(original=original, corrected=corrected, author=author, kind="answer", step=2)
    return token_client(users["researcher"]), "/api/v1/corrections/", Correction.objects.order_by("-id")


def _evaluations(users):
    from training.models import Evaluation

    for i in range(N):
        Evaluation.objects.create(name=f"e{i}")
    return token_client(users["researcher"]), "/api/v1/evaluations/", Evaluation.objects.order_by("-id")


def _users(users):
    from webapp.models import User

    UserFactory.create_batch(N)
    return token_client(users["admin"]), "/api/v1/users/", User.objects.order_by("-id")


def _own_tokens(users):
    from webapp.models import ApiToken
    from webapp.tokens import api_token_create

    for i in range(N):
        api_token_create(user=users["annotator"], name=f"t{i}")
    return (
        token_client(users["annotator"]),
        "/api/v1/tokens/",
        ApiToken.objects.filter(user=users["annotator"]).order_by("-id"),
    )


def _user_tokens(users):
    from webapp.models import ApiToken
    from webapp.tokens import api_token_create

    target = UserFactory()
    for i in range(N):
        api_token_create(user=target, name=f"t{i}")
    return (
        token_client(users["admin"]),
        f"/api/v1/users/{target.pk}/tokens",
        ApiToken.objects.filter(user=target).order_by("-id"),
    )


def _workers(users):
    from django.utils import timezone

    from webapp.models import WorkerBeat

    now = timezone.now()
    for i in range(N):
        WorkerBeat.objects.create(hostname=f"w{i}@test", queues="default", started_at=now, beat_at=now)
    return token_client(users["researcher"]), "/api/v1/workers/", WorkerBeat.objects.order_by("-id")


LISTS = {
    "runs": _runs,
    "runs by status": _runs_filtered,
    "datasets": _datasets,
    "campaigns": _campaigns,
    "campaign fills": _fills,
    "campaign judgements": _judgements,
    "judges": _judges,
    "campaign judge votes": _judge_votes,
    "judge calls": _judge_calls,
    "corrections": _corrections,
    "evaluations": _evaluations,
    "users": _users,
    "own tokens": _own_tokens,
    "user tokens": _user_tokens,
    "workers": _workers,
}


def _ids(rows: list[dict]) -> list:
    return [row.get("id") or row["hostname"] for row in rows]  # a worker is known by its hostname


def _expected(query) -> list:
    return [getattr(row, "hostname", row.pk) for row in query]


def _with(path: str, **params) -> str:
    return f"{path}{'&' if '?' in path else '?'}{urlencode(params)}"


def _page(client, url: str) -> dict:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response.json()


@pytest.mark.parametrize("name", LISTS)
def test_following_next_gives_every_row_once_in_order(role_users, name):
    client, path, query = LISTS[name](role_users)
    expected = _expected(query)
    assert len(expected) > 2
    url, pages, seen = _with(path, page_size=2), [], []
    while url:
        page = _page(client, url)
        pages.append(page)
        assert len(page["results"]) <= 2 and "page_size=2" in (page["next"] or "page_size=2")
        seen += _ids(page["results"])
        url = page["next"]
    assert seen == expected
    assert len(pages) == math.ceil(len(expected) / 2)
    assert pages[0]["previous"] is None and pages[-1]["next"] is None
    if name == "workers":  # the queue summary stays beside every page
        assert all(p["queues"]["default"]["alive"] == N for p in pages)
    # Back from the last page by `previous`: the same pages, in reverse.
    back, url = [], pages[-1]["previous"]
    while url:
        page = _page(client, url)
        back.insert(0, _ids(page["results"]))
        url = page["previous"]
    assert [i for ids in back for i in ids] + _ids(pages[-1]["results"]) == expected


def test_rows_made_while_paging_are_neither_skipped_nor_repeated(role_users):
    from webapp.models import Run

    client, path, query = _runs(role_users)
    expected = _expected(query)
    first = _page(client, _with(path, page_size=2))
    for _ in range(3):  # newer than every row listed: they belong before the first page
        Run.objects.create(kind="rollout", status="queued", config={})
    seen, url = _ids(first["results"]), first["next"]
    while url:
        page = _page(client, url)
        seen += _ids(page["results"])
        url = page["next"]
    assert seen == expected


def test_judgements_made_while_paging_come_last_once(role_users):
    from annotate.models import Judgement

    client, path, query = _judgements(role_users)
    comparison = query.first().comparison
    first = _page(client, _with(path, page_size=2))
    for annotator in UserFactory.create_batch(3, roles=["annotator"]):
        Judgement.objects.create(comparison=comparison, annotator=annotator, choice=4)
    seen, url = _ids(first["results"]), first["next"]
    while url:
        page = _page(client, url)
        seen += _ids(page["results"])
        url = page["next"]
    assert seen == _expected(query) and len(seen) == N + 3


def test_the_campaign_judgements_are_bounded_by_the_default_page(role_users):
    client, path, query = _judgements(role_users, n=PAGE_SIZE + 1)
    first = _page(client, path)
    assert len(first["results"]) == PAGE_SIZE and first["next"]
    assert api_rows(client, path) == first["results"] + _page(client, first["next"])["results"]
    assert len(api_rows(client, path)) == PAGE_SIZE + 1 == query.count()


def _refused(client, url: str, field: str) -> dict:
    response = client.get(url)
    assert response.status_code == 400, (url, response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["errors"][0]["field"] == field and isinstance(body["detail"], str), body
    return body


@pytest.mark.parametrize("name", LISTS)
def test_a_page_size_over_the_maximum_is_refused_and_the_maximum_taken(role_users, name):
    client, path, query = LISTS[name](role_users)
    body = _refused(client, _with(path, page_size=MAX_PAGE_SIZE + 1), "page_size")
    assert f"from 1 to {MAX_PAGE_SIZE}" in body["detail"]
    page = _page(client, _with(path, page_size=MAX_PAGE_SIZE))
    assert _ids(page["results"]) == _expected(query) and page["next"] is None


def _cursor(text: str) -> str:
    return b64encode(text.encode()).decode()


HOSTILE = ["-1", "0", "abc", "1e9", "²", "٣", "1.5", " 1", "\u0000", "9" * 30]
FORGED_CURSORS = [
    _cursor(t)
    for t in ("p=-1", "p=0", "p=abc", "p=1e9", "p=" + "9" * 20, "p=", "o=5&p=1", "r=2&p=1", "x=1&p=1", "p=1&&")
] + ["cD0x!", "cD0x-", "cD0"]


@pytest.mark.parametrize("name", LISTS)
def test_hostile_paging_values_answer_400_json_never_500(role_users, name):
    client, path, _ = LISTS[name](role_users)
    for value in HOSTILE:
        _refused(client, _with(path, page_size=value), "page_size")
        _refused(client, _with(path, cursor=value), "cursor")
    for value in FORGED_CURSORS:
        _refused(client, _with(path, cursor=value), "cursor")
    for value in ("1", "2", "abc"):  # there are no page numbers: a script counting them would loop forever
        _refused(client, _with(path, page=value), "page")


def test_a_cursor_holds_only_an_id_and_any_id_is_a_place_in_the_list(role_users):
    client, path, query = _users(role_users)
    assert _page(client, _with(path, cursor=_cursor("p=1")))["results"] == []
    top = _page(client, _with(path, cursor=_cursor(f"p={2**63 - 1}")))
    assert _ids(top["results"]) == _expected(query)


def test_every_list_in_the_schema_is_paged():
    """No operation answers a bare array; the paged ones are exactly the lists above."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    paged = set()
    for path, item in schema["paths"].items():
        for method, op in item.items():
            content = op.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
            body = content.get("schema", {})
            body = components[body["$ref"].rsplit("/", 1)[1]] if "$ref" in body else body
            assert body.get("type") != "array", (method, path)
            if "results" in body.get("properties", {}):
                params = {p["name"]: p["schema"] for p in op.get("parameters", [])}
                assert params["page_size"]["maximum"] == MAX_PAGE_SIZE and "cursor" in params, path
                assert set(body["required"]) >= {"next", "previous", "results"}, path
                paged.add(path)
    assert paged == {
        "/api/v1/runs/",
        "/api/v1/workers/",
        "/api/v1/datasets/",
        "/api/v1/campaigns/",
        "/api/v1/campaigns/{campaign_id}/fills/",
        "/api/v1/campaigns/{campaign_id}/judgements",
        "/api/v1/campaigns/{campaign_id}/judge-votes",
        "/api/v1/judges/",
        "/api/v1/judges/{judge_id}/calls",
        "/api/v1/corrections/",
        "/api/v1/evaluations/",
        "/api/v1/users/",
        "/api/v1/tokens/",
        "/api/v1/users/{user_id}/tokens",
    }
