"""Property-based fuzzing of every API operation, as every role (schemathesis over the generated schema).

Schemathesis generates requests that fit the schema and requests that do not (wrong
types, missing fields, out-of-range numbers, odd strings), and each must be answered
without a server error, with a JSON body for every error. Bounded by examples per
operation (`FUZZ_EXAMPLES`, default 10), not by time, so a slow machine runs the same
requests. The counts of requests and statuses go to test-output/api-fuzz-counts.json (one
file per xdist worker, api-fuzz-counts-gw0.json ...; $ARBITER_FUZZ_COUNTS names another);
`benchmarks/api_fuzz.py` runs it with more examples and prints them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings

from tests.conftest import ARTIFACTS
from tests_env import SUFFIX

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))
ROLES = ("admin", "researcher", "annotator", "anonymous")
COUNTS: Counter = Counter()

schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
APP = get_wsgi_application()


@pytest.fixture(scope="module", autouse=True)
def _write_counts():
    yield
    ARTIFACTS.mkdir(exist_ok=True)
    counts = os.environ.get("ARBITER_FUZZ_COUNTS") or ARTIFACTS / f"api-fuzz-counts{SUFFIX}.json"
    Path(counts).write_text(
        json.dumps(
            {
                "examples_per_operation": EXAMPLES,
                "requests": sum(COUNTS.values()),
                "statuses": {str(k): v for k, v in sorted(COUNTS.items())},
            },
            indent=1,
        )
    )


@pytest.fixture
def world(db):
    """A token per role, and a little of everything so that some generated ids exist.

    Each test runs in a transaction rolled back at its end (much cheaper than emptying every
    table after it). The requests go straight to the WSGI application, so, as Django's test
    client does, the request signals leave the connection open: closing it would end the
    test's transaction.
    """
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from tests.factories import UserFactory
    from tests.helpers import make_campaign
    from webapp.models import Run
    from webapp.tokens import api_token_create

    tokens = {
        role: api_token_create(user=UserFactory(username=f"fz-{role}", roles=[role]), name="fuzz")[1]
        for role in ROLES[:3]
    }
    make_campaign(n_comparisons=2, k=2)
    Run.objects.create(kind="rollout", status="failed", config={})
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield tokens
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.parametrize("role", ROLES)
@schema.parametrize()
@hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error(case, role, world):
    headers = {"Authorization": f"Token {world[role]}"} if role in world else {}
    response = case.call(app=APP, headers=headers, base_url="http://testserver")
    COUNTS[response.status_code] += 1
    assert response.status_code < 500, (case.method, case.formatted_path, case.query, case.body, response.text[:400])
    if response.status_code >= 400:
        content_type = (response.headers.get("content-type") or [""])[0]
        assert content_type.startswith("application/json"), response.text[:200]
        assert isinstance(response.json().get("detail"), str)
