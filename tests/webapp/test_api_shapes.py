"""A second API fuzzer, for the shapes schemathesis does not reach: every JSON body the API
reads, with each value at every nesting level replaced by a value of another type (null, a
boolean, numbers out of every range, NaN, strings with a lone surrogate, NUL or "²", lists,
objects), and whole bodies that are valid JSON but not an object; every query parameter with
odd digits. Each request must be answered below 500, with a JSON error body.

Bodies start from a valid request of each operation (for trajectories, a record of every
import format as its tool writes it), so the mutations reach the code behind validation.
Bounded by count, not time: at most PATHS_PER_BODY places per body, each with every value.
The counts go to test-output/api-shape-fuzz-counts.json (one file per xdist worker,
api-shape-fuzz-counts-gw0.json ...); benchmarks/RESULTS.md has them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS, token_client
from tests.helpers import ANTHROPIC, CANONICAL, OPENAI
from tests_env import SUFFIX

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "annotate" / "trace_formats" / "fixtures"
PATHS_PER_BODY = 14
# Raw JSON text: what json.dumps cannot write (NaN, lone surrogates) is written as it is sent.
HOSTILE = [
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "9223372036854775808",
    "1e400",
    "NaN",
    '"x"',
    '""',
    '"\\ud800"',
    '"a\\u0000b"',
    '"²"',
    "[]",
    "[null]",
    "{}",
    '{"a": null}',
    # JSON text inside a string (tool arguments, message lists, metadata), with what the outer
    # parser cannot see: NaN, a lone surrogate, NUL, a non-object.
    '"{\\"q\\": NaN}"',
    '"{\\"q\\": \\"\\\\ud800\\"}"',
    '"{\\"q\\": \\"\\\\u0000\\"}"',
    '"[1, 2"',
    '"5"',
]
WHOLE_BODIES = HOSTILE + ["[{}]", '[1, "x"]']
COUNTS: Counter = Counter()
MARK = "@@hostile@@"


def _first_line(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text().splitlines()[0])


def _bodies(world) -> dict[str, tuple[str, str, object]]:
    """name -> (method, path, a valid body)."""
    c, a = world["campaign"], world["assignment"]
    return {
        "trajectories canonical": ("POST", "/api/v1/trajectories/", CANONICAL),
        "trajectories openai": ("POST", "/api/v1/trajectories/?format=openai", OPENAI),
        "trajectories anthropic": ("POST", "/api/v1/trajectories/?format=anthropic", ANTHROPIC),
        "trajectories otel": ("POST", "/api/v1/trajectories/?format=otel", _first_line("otel/agents.otlp.jsonl")),
        "trajectories openinference": (
            "POST",
            "/api/v1/trajectories/?format=openinference",
            _first_line("openinference/spans.jsonl"),
        ),
        "trajectories langsmith": (
            "POST",
            "/api/v1/trajectories/?format=langsmith",
            _first_line("langsmith/agents.jsonl"),
        ),
        "trajectories langfuse": (
            "POST",
            "/api/v1/trajectories/?format=langfuse",
            _first_line("langfuse/agents.jsonl"),
        ),
        "judgement": (
            "POST",
            f"/api/v1/assignments/{a}/judgement",
            {
                "choice": 2,
                "both_bad": False,
                "ratings": {"correctness": {"left": 4, "right": 2}},
                "first_wrong_step_left": 0,
                "rationale": "why",
            },
        ),
        "skip": ("POST", f"/api/v1/assignments/{a}/skip", {"reason": "Other"}),
        "campaign create": (
            "POST",
            "/api/v1/campaigns/",
            {
                "name": "fz",
                "guidelines": "# g",
                "votes_per_comparison": 2,
                "lease_seconds": 600,
                "gold_rate": 0.1,
                "dimensions": [{"name": "correctness", "scale": 5, "description": "d", "required": True}],
                "rationale_required": False,
                "deadline": "2099-01-01T00:00",
                "pool_only": False,
                "pool": [],
                "environment": "",
                "task_split": "",
                "status": "draft",
            },
        ),
        "campaign patch": (
            "PATCH",
            f"/api/v1/campaigns/{c}",
            {"guidelines": "# g2", "dimensions": ["x"], "shown_judge": None, "judge_mode": "blind", "pool": [1]},
        ),
        "campaign clone": ("POST", f"/api/v1/campaigns/{c}/clone", {"name": "copy"}),
        "campaign status": ("POST", f"/api/v1/campaigns/{c}/status", {"action": "pause"}),
        "fill preview": (
            "POST",
            f"/api/v1/campaigns/{c}/fill/preview",
            {
                "strategy": "all_pairs",
                "max_per_task": 3,
                "import_batches": [],
                "policies": [],
                "runs": [],
                "split": "train",
                "tags": ["a"],
                "seed": 1,
                "all_trajectories": True,
            },
        ),
        "fill": ("POST", f"/api/v1/campaigns/{c}/fills/", {"strategy": "outcome_differs", "tags": ["a"]}),
        "gold": ("POST", f"/api/v1/campaigns/{c}/gold", [{"task_id": "t-1", "a": 1, "b": 2, "choice": 2}]),
        "gold promote": ("POST", f"/api/v1/campaigns/{c}/gold/promote", {"comparison_ids": [1]}),
        "dataset": (
            "POST",
            "/api/v1/datasets/",
            {
                "name": "d",
                "campaign_ids": [c],
                "seed": 0,
                "test_fraction": 0.2,
                "aggregation": "majority",
                "ties": "drop",
                "feedback": "both",
                "judges": [1],
            },
        ),
        "run bc": (
            "POST",
            "/api/v1/runs/",
            {"kind": "bc", "name": "n", "config": {"max_steps": 2, "policy_name": "p"}},
        ),
        "run rollout": ("POST", "/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": 1, "tasks": 1}}),
        "run reward model": (
            "POST",
            "/api/v1/runs/",
            {
                "kind": "reward_model",
                "config": {"snapshot_id": 1, "epochs": 1, "learning_rate": 0.001},
                "idempotency_key": "k",
            },
        ),
        "token": ("POST", "/api/v1/tokens/", {"name": "t"}),
        "user create": ("POST", "/api/v1/users/", {"username": "u1", "email": "u@x.org", "roles": ["annotator"]}),
        "user patch": (
            "PATCH",
            f"/api/v1/users/{world['user']}",
            {"email": "v@x.org", "roles": ["researcher"], "is_active": True},
        ),
        "user password": ("POST", f"/api/v1/users/{world['user']}/password", {"password": "a-long-password-1"}),
        "user token": ("POST", f"/api/v1/users/{world['user']}/tokens", {"name": "t"}),
    }


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _places(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _places(inner, (*path, i))


def _spread(items: list, n: int) -> list:
    """n items spread over the list (all of them when there are fewer)."""
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def _with(body, path: tuple, raw: str) -> str:
    """The body as JSON text with the value at `path` replaced by the raw JSON `raw`."""
    if not path:
        return raw
    copy = json.loads(json.dumps(body))
    parent = copy
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = MARK
    return json.dumps(copy).replace(json.dumps(MARK), raw, 1)


@pytest.fixture
def world():
    from annotate.services.assignments import assignment_next
    from tests.factories import UserFactory
    from tests.helpers import make_campaign
    from webapp.models import Run

    admin = UserFactory(username="shape-admin", roles=["admin", "annotator"])
    campaign = make_campaign(
        n_comparisons=3, k=2, dimensions=[{"name": "correctness", "scale": 5, "description": "", "required": False}]
    )
    assignment = assignment_next(campaign=campaign, annotator=admin)
    run = Run.objects.create(kind="rollout", status="failed", config={})
    other = UserFactory(username="shape-user", roles=["annotator"])
    return {
        "client": token_client(admin),
        "campaign": campaign.pk,
        "assignment": assignment.pk,
        "run": run.pk,
        "user": other.pk,
    }


@pytest.fixture(scope="module", autouse=True)
def _write_counts():
    yield
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"api-shape-fuzz-counts{SUFFIX}.json").write_text(
        json.dumps(
            {"requests": sum(COUNTS.values()), "statuses": {str(k): v for k, v in sorted(COUNTS.items())}}, indent=1
        )
    )


def _send(client, method: str, path: str, text: str):
    response = client.generic(method, path, text.encode("utf-8", "surrogatepass"), content_type="application/json")
    COUNTS[response.status_code] += 1
    assert response.status_code < 500, (method, path, text[:300], response.content[:300])
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json"), (path, response.content[:200])
    return response


BODY_NAMES = list(_bodies({"campaign": 1, "assignment": 1, "run": 1, "user": 1}))


@pytest.mark.parametrize("name", BODY_NAMES)
def test_wrong_types_at_every_level_never_answer_500(world, name):
    method, path, body = _bodies(world)[name]
    places = _spread([p for p in _places(body) if p], PATHS_PER_BODY)
    for place in places:
        for raw in HOSTILE:
            _send(world["client"], method, path, _with(body, place, raw))
    for raw in WHOLE_BODIES:
        _send(world["client"], method, path, raw)


# Ids spelled with digits `int` reads differently or refuses ("²" is a digit to str.isdigit).
ODD_DIGITS = ['"²"', '"٣"', '" 1"', '"1.0"']


@pytest.mark.parametrize("name", BODY_NAMES)
def test_odd_digits_at_every_place_of_every_body_never_answer_500(world, name):
    """Every value at every nesting level (not a spread of them): whichever field holds an id,
    however deep, gets "²" and its kin."""
    method, path, body = _bodies(world)[name]
    for place in (p for p in _places(body) if p):
        for raw in ODD_DIGITS:
            _send(world["client"], method, path, _with(body, place, raw))


ODD_IDS = ["²", "٣", "1e3", "-1", "0", "9" * 30, "1.0", " 1", "%00", "", "\ud800"]


@pytest.mark.parametrize("role", ["admin", "anonymous"])
def test_odd_query_values_never_answer_500(world, client, role):
    caller = world["client"] if role == "admin" else client
    for value in ODD_IDS:
        for path in (
            f"/api/v1/assignments/next?campaign={value}",
            f"/api/v1/trajectories/?campaign={value}",
            f"/api/v1/runs/?kind={value}&status={value}",
            f"/api/v1/runs/{world['run']}?metrics={value}",
            f"/api/v1/campaigns/?status={value}",
            f"/api/v1/datasets/1/download?format={value}&filetype={value}",
            f"/api/v1/runs/?page_size={value}",
            f"/api/v1/users/?cursor={value}",
            f"/api/v1/campaigns/{world['campaign']}/judgements?cursor={value}&page_size={value}",
        ):
            method = "POST" if "trajectories" in path else "GET"
            response = caller.generic(
                method,
                path.encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
                b"[]",
                content_type="application/json",
            )
            COUNTS[response.status_code] += 1
            assert response.status_code < 500, (path, response.content[:300])
