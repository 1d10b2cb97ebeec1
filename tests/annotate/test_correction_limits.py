"""Issue 53: per-person limits hold under a burst. Each limit used to be counted and then
written without a lock, so requests at once each counted the same few rows: 16 corrections of
one side stored 8 against a limit of 5. Here each submit runs in its own thread with its own
PostgreSQL connection, all released together by a barrier."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from annotate.models import Correction
from annotate.services.corrections import correction_submit
from tests.factories import UserFactory
from tests.helpers import imported_comparison_assignment
from webapp.errors import ArbiterError
from webapp.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)
BURST = 16


def _burst(work) -> tuple[list, list[str]]:
    """`work(i)` for i in 0..BURST-1, all at once, each thread on its own connection: (results,
    refusals). Anything but a refusal (ArbiterError) fails the test."""
    barrier = threading.Barrier(BURST)

    def run(i):
        try:
            barrier.wait()
            return work(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=BURST) as pool:
        futures = [pool.submit(run, i) for i in range(BURST)]
    failures = [f.exception() for f in futures if f.exception() is not None]
    assert [repr(e) for e in failures if not isinstance(e, ArbiterError)] == []
    return [f.result() for f in futures if f.exception() is None], [e.message for e in failures]


def test_a_burst_of_corrections_of_one_side_stores_at_most_the_limit(settings):
    assert connection.vendor == "postgresql"
    settings.CORRECTIONS_PER_SIDE, settings.CORRECTIONS_PER_HOUR = 5, 60
    annotator = UserFactory(roles=["annotator"])
    assignment = imported_comparison_assignment(annotator)

    def submit(i):
        body = {"side": "left", "kind": "answer", "answer": f"the fix, take {i}"}
        return correction_submit(assignment_id=assignment.pk, annotator=annotator, body=body)

    stored, refused = _burst(submit)
    assert Correction.objects.filter(author=annotator).count() == len(stored) == 5
    assert len(refused) == BURST - 5 and all("corrections of this side already" in m for m in refused)


def test_a_burst_of_corrections_stores_at_most_the_hourly_limit(settings):
    settings.CORRECTIONS_PER_SIDE, settings.CORRECTIONS_PER_HOUR = 100, 6
    annotator = UserFactory(roles=["annotator"])
    assignments = [imported_comparison_assignment(annotator) for _ in range(2)]  # two comparisons, four sides

    def submit(i):
        body = {"side": ("left", "right")[i % 2], "kind": "answer", "answer": f"fix {i}"}
        return correction_submit(assignment_id=assignments[i // 8].pk, annotator=annotator, body=body)

    stored, refused = _burst(submit)
    assert Correction.objects.filter(author=annotator).count() == len(stored) == 6
    assert len(refused) == BURST - 6 and all("in the last hour" in m for m in refused)


def test_a_burst_of_one_persons_corrections_does_not_hold_up_anothers(settings):
    """The lock is the author's row: another person's corrections are counted apart."""
    settings.CORRECTIONS_PER_SIDE, settings.CORRECTIONS_PER_HOUR = 3, 60
    people = [UserFactory(roles=["annotator"]) for _ in range(2)]
    assignments = [imported_comparison_assignment(person) for person in people]

    def submit(i):
        body = {"side": "left", "kind": "answer", "answer": f"fix {i}"}
        return correction_submit(assignment_id=assignments[i % 2].pk, annotator=people[i % 2], body=body)

    stored, _ = _burst(submit)
    assert [Correction.objects.filter(author=p).count() for p in people] == [3, 3] and len(stored) == 6


def test_a_burst_of_token_requests_stores_at_most_the_limit(monkeypatch):
    from webapp import tokens

    monkeypatch.setattr(tokens, "MAX_TOKENS_PER_USER", 4)
    user = UserFactory(roles=["researcher"])
    stored, refused = _burst(lambda i: tokens.api_token_create(user=user, name=f"script {i}"))
    assert ApiToken.objects.filter(user=user).count() == len(stored) == 4
    assert len(refused) == BURST - 4 and all("4 tokens already" in m for m in refused)
