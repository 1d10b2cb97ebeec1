"""The labeling cycle's statements on PostgreSQL, written out: five per cycle (next + submit).

An annotator's script calls `next` then `submit` in a loop, and on that path the cost of
building and compiling ORM queries was most of the server's time (benchmarks/labeling_cycle.py,
issue 31). So on PostgreSQL the cycle runs these statements, each one round trip, with no
explicit transaction: each statement is atomic on its own.

- next:   CAMPAIGN (the campaign's labeling settings), LEASE_OR_TAKE (the annotator's live
          lease, else pick, lock and take a slot and record the lease; when it finds nothing,
          CANDIDATE_LOCKED tells "nothing left" from "what is left is locked this instant"),
          SCREEN (what the screen shows);
- submit: SUBMIT_READ (the assignment with what the rules need), SUBMIT_WRITE (finish the
          lease, count the vote, drop the draft and store the judgement, only if the lease is
          still live: a compare-and-set, so two submits or a submit racing the sweep store one vote).

The rules (who may label, what a verdict must carry, the side mapping) stay in Python,
shared with the ORM path that SQLite (the embedded mode) and the rare cases (a late submit
after the sweep, a repeated submit) take: annotate/services/assignments.py. The benchmark's
raw-SQL floor issues these same strings from a plain psycopg loop, so the comparison is
statement for statement. This module does not import Django, so that loop can read it.
"""

import json
from datetime import datetime
from typing import Any, NamedTuple

import orjson


def json_column(text):
    """A jsonb column read by a raw cursor (Django's PostgreSQL backend loads jsonb as text)."""
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # integers past 64 bits, which PostgreSQL keeps exactly
        return json.loads(text)


CAMPAIGN = """
SELECT id, name, status, votes_per_comparison, lease_seconds, gold_rate, pool_only
FROM annotate_campaign WHERE id = %(campaign)s
"""
CAMPAIGN_FIELDS = ("id", "name", "status", "votes_per_comparison", "lease_seconds", "gold_rate", "pool_only")

# The comparisons the annotator may be given a slot on: open, of the kind asked for (gold or
# not), never assigned to them, and `slot_rule` (empty for gold comparisons, which do not
# count against k).
_CANDIDATES = """
    SELECT c.id FROM annotate_comparison c
    WHERE c.campaign_id = %(campaign)s AND c.status = 'open' AND c.is_gold = %(gold)s
      {slot_rule}
      AND NOT EXISTS (SELECT 1 FROM annotate_assignment a
                      WHERE a.comparison_id = c.id AND a.annotator_id = %(annotator)s)
"""

# The live lease, if the annotator holds one; otherwise a candidate comparison locked with
# SKIP LOCKED (annotators pulling at once skip each other's rows), its slot taken, and the
# lease inserted. One statement, one snapshot.
_LEASE_OR_TAKE = """
WITH held AS (
    SELECT a.id, a.comparison_id, a.left_is_a, a.leased_until, a.shown_at, a.created_at
    FROM annotate_assignment a JOIN annotate_comparison c ON c.id = a.comparison_id
    WHERE a.annotator_id = %(annotator)s AND a.status = 'leased' AND a.leased_until > %(now)s
      AND c.campaign_id = %(campaign)s
    ORDER BY a.created_at
    LIMIT 1
), candidate AS (
    {candidates}
      AND NOT EXISTS (SELECT 1 FROM held)
    ORDER BY c.priority DESC, c.id
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), taken AS (
    UPDATE annotate_comparison c SET slots_taken = c.slots_taken + 1
    FROM candidate WHERE c.id = candidate.id
    RETURNING c.id
), leased AS (
    INSERT INTO annotate_assignment
        (created_at, updated_at, comparison_id, annotator_id, left_is_a, status, leased_until, shown_at, skip_reason)
    SELECT %(now)s, %(now)s, taken.id, %(annotator)s, %(left_is_a)s, 'leased', %(until)s, %(now)s, ''
    FROM taken
    RETURNING id, comparison_id, left_is_a, leased_until, shown_at, created_at
)
SELECT id, comparison_id, left_is_a, leased_until, shown_at, created_at FROM held
UNION ALL
SELECT id, comparison_id, left_is_a, leased_until, shown_at, created_at FROM leased
"""
_SLOT_FREE = "AND c.slots_taken < %(k)s"
LEASE_OR_TAKE = _LEASE_OR_TAKE.format(candidates=_CANDIDATES.format(slot_rule=_SLOT_FREE))
LEASE_OR_TAKE_GOLD = _LEASE_OR_TAKE.format(candidates=_CANDIDATES.format(slot_rule=""))

# When LEASE_OR_TAKE finds nothing: is there a candidate all the same, whose row another
# statement holds locked at this moment (a pull taking a slot on it, a submit counting a vote)?
# SKIP LOCKED passed it by; "nothing left" would be wrong, so the pull asks again.
CANDIDATE_LOCKED = f"SELECT EXISTS ({_CANDIDATES.format(slot_rule=_SLOT_FREE)})"
CANDIDATE_LOCKED_GOLD = f"SELECT EXISTS ({_CANDIDATES.format(slot_rule='')})"
LEASE_FIELDS = ("id", "comparison_id", "left_is_a", "leased_until", "shown_at", "created_at")

# A judge's vote is filled in for people only this sure (max(P, 1 - P) of a reward-model
# judge; a chat judge gives no probability and is always sure): annotate/judges/votes.py.
PREFILL_CONFIDENCE = 0.7
PREFILL_SURE_SQL = (
    "(v.probability_a IS NULL OR v.probability_a >= %(prefill_sure)s OR v.probability_a <= 1 - %(prefill_sure)s)"
)

SCREEN_TEMPLATE = """
SELECT a.id, a.left_is_a, a.leased_until, c.campaign_id, t.prompt,
       ta.steps, ta.answer, tb.steps, tb.answer, cp.dimensions, cp.rationale_required, cp.judge_mode,
       (SELECT v.choice FROM annotate_judgevote v
        WHERE v.comparison_id = c.id AND v.judge_id = cp.shown_judge_id AND v.probe = 'first'
          AND {sure})
FROM annotate_assignment a
JOIN annotate_comparison c ON c.id = a.comparison_id
JOIN annotate_task t ON t.id = c.task_id
JOIN annotate_trajectory ta ON ta.id = c.trajectory_a_id
JOIN annotate_trajectory tb ON tb.id = c.trajectory_b_id
JOIN annotate_campaign cp ON cp.id = c.campaign_id
WHERE a.id = %(assignment)s
"""

SUBMIT_READ = """
SELECT a.id, a.status, a.left_is_a, a.shown_at, a.created_at, a.comparison_id,
       c.is_gold, c.campaign_id, ta.num_steps, tb.num_steps,
       cp.name, cp.status, cp.pool_only, cp.votes_per_comparison, cp.dimensions, cp.rationale_required,
       cp.judge_mode, cp.shown_judge_id
FROM annotate_assignment a
JOIN annotate_comparison c ON c.id = a.comparison_id
JOIN annotate_trajectory ta ON ta.id = c.trajectory_a_id
JOIN annotate_trajectory tb ON tb.id = c.trajectory_b_id
JOIN annotate_campaign cp ON cp.id = c.campaign_id
WHERE a.id = %(assignment)s AND a.annotator_id = %(annotator)s
"""


class SubmitRead(NamedTuple):
    """One row of SUBMIT_READ, its columns in order."""

    id: int
    status: str
    left_is_a: bool
    shown_at: datetime | None
    created_at: datetime
    comparison_id: int
    is_gold: bool
    campaign_id: int
    size_a: int
    size_b: int
    name: str
    campaign_status: str
    pool_only: bool
    k: int
    dimensions: Any
    rationale_required: bool
    judge_mode: str
    shown_judge_id: int | None


# Only while the lease is live ('leased'): otherwise nothing is written and the caller takes
# the locked ORM path, which knows the other states. The vote count and status rule is the
# ORM path's: a gold comparison stays open, another is complete at its k-th vote.
SUBMIT_WRITE_TEMPLATE = """
WITH finished AS (
    UPDATE annotate_assignment SET status = 'submitted', finished_at = %(now)s, updated_at = %(now)s
    WHERE id = %(assignment)s AND status = 'leased'
    RETURNING id, comparison_id
), counted AS (
    UPDATE annotate_comparison c
    SET votes = c.votes + 1,
        status = CASE WHEN c.is_gold THEN 'open' WHEN c.votes >= %(k)s - 1 THEN 'complete' ELSE c.status END
    FROM finished WHERE c.id = finished.comparison_id
    RETURNING c.id
), drafted AS (
    -- The judgement in progress is done with (annotate/services/drafts.py).
    DELETE FROM annotate_judgementdraft d USING finished WHERE d.assignment_id = finished.id
)
INSERT INTO annotate_judgement
    (created_at, updated_at, comparison_id, annotator_id, assignment_id, choice, both_bad, ratings,
     first_wrong_step_a, first_wrong_step_b, rationale, seconds, synthetic, judge_suggestion)
SELECT %(now)s, %(now)s, finished.comparison_id, %(annotator)s, finished.id, %(choice)s, %(both_bad)s,
       %(ratings)s::jsonb, %(first_wrong_step_a)s, %(first_wrong_step_b)s, %(rationale)s, %(seconds)s, %(synthetic)s,
       -- What a prefilled form showed: the campaign's judge's vote on this comparison (annotate/judges/votes.py).
       (SELECT v.choice FROM annotate_judgevote v
        JOIN annotate_comparison jc ON jc.id = v.comparison_id
        JOIN annotate_campaign jp ON jp.id = jc.campaign_id
        WHERE v.comparison_id = finished.comparison_id AND v.judge_id = jp.shown_judge_id AND v.probe = 'first'
          AND jp.judge_mode = 'prefilled' AND {sure})
FROM finished
RETURNING id
"""

# The judge's vote shows (and is recorded as shown) only where it is sure enough: the one rule,
# annotate/judges/votes.py (pass `prefill_sure`: PREFILL_CONFIDENCE).
SCREEN = SCREEN_TEMPLATE.format(sure=PREFILL_SURE_SQL)
SUBMIT_WRITE = SUBMIT_WRITE_TEMPLATE.format(sure=PREFILL_SURE_SQL)
