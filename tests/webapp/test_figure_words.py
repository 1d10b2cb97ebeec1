"""Numbers that read as finished (issue 44): a lease, a pace, an estimated finish, an interval
over too few items, each in the words a person reads, never "0 min", "0.0/h", "7176.0 h" or
"[100.0, 100.0]" over three items."""

import pytest

from webapp.templatetags.arbiter import duration, eta, interval, lease_clock, minutes, pace


@pytest.mark.parametrize(
    "seconds, words",
    [(30, "30 s"), (90, "1 min 30 s"), (900, "15 min"), (5400, "1 h 30 min"), (3 * 86400, "3 days"), (None, "–")],
)
def test_durations_are_in_the_unit_a_person_reads(seconds, words):
    assert duration(seconds) == words


def test_minutes_left_under_one_are_seconds_never_zero_minutes():
    assert minutes(0.3) == "18 s" and minutes(4.0) == "4 min" and minutes(None) == "–"


def test_an_estimated_finish_far_away_says_so_instead_of_thousands_of_hours():
    assert eta(7176.0) == "in about 299 days" and eta(0.75) == "in about 45 min" and eta(30) == "in about 30 h"
    assert eta(10_000) == "not within a year at this pace" and eta(None) == "–"


def test_a_slow_pace_is_per_day_and_no_pace_is_a_dash():
    assert pace(12.46) == "12.5/h" and pace(1 / 24) == "0.042/h" and pace(0.0) == "–" and pace(None) == "–"


def test_the_lease_clock_counts_seconds():
    assert lease_clock(30) == "0:30" and lease_clock(872) == "14:32" and lease_clock(3725) == "1:02:05"


def test_no_interval_is_shown_over_too_few_items():
    assert "too few for an interval: n = 3" in interval({"mean": 1.0, "low": 1.0, "high": 1.0, "units": 3}, "percent")
    assert "[50.0, 90.0]" in interval({"mean": 0.7, "low": 0.5, "high": 0.9, "tasks": 40}, "percent")
    assert "[50.0, 90.0]" in interval({"mean": 0.7, "low": 0.5, "high": 0.9}, "percent")  # no count: as given


@pytest.mark.parametrize(
    "text",
    ["", "short", "x" * 20, "x" * 21, "e\u0301" * 20, "e\u0301" * 21, "cafe\u0301 " * 7, {"a": "b" * 30}, None],
)
@pytest.mark.parametrize("length", [0, 1, 20, "20", "no"])
def test_clip_is_truncatechars_without_the_walk(text, length):
    from django.template.defaultfilters import truncatechars

    from webapp.templatetags.arbiter import clip

    assert clip(text, length) == truncatechars(text, length)
