"""Words against numbers (issue 53): one formatter for a share and one for a rate, so a page
never shows "about 22 a day" beside "30.9/h", or "0.8115942028985508" for 81.2%; an evaluation
row's name does not repeat its badges."""

from __future__ import annotations

import pytest

from core.figures import rate_text, share_text
from training.evaluation.selectors import row_name
from training.models import EvaluationEntry


def test_two_campaigns_paces_are_in_one_unit():
    # 22 and 741 judgements in the last 24 hours, side by side on the campaigns page.
    assert rate_text(22 / 24) == "0.92/h"
    assert rate_text(741 / 24) == "30.9/h"
    assert rate_text(1 / 24) == "0.042/h"
    assert rate_text(0.0) == rate_text(None) == "–"
    assert rate_text(1e-5) == "under 0.001/h"


@pytest.mark.parametrize("value,text", [(0.8115942028985508, "81.2%"), (0.0, "0.0%"), (1, "100.0%"), (None, "–")])
def test_a_share_is_a_rounded_percentage(value, text):
    assert share_text(value) == text


def test_the_share_filter_and_the_logs_write_a_share_the_same_way():
    from webapp.templatetags.arbiter import pace, percent

    assert percent(0.8115942028985508) == share_text(0.8115942028985508) == "81.2%"
    assert pace(22 / 24) == rate_text(22 / 24)


@pytest.mark.parametrize(
    "label,n,name",
    [
        ("default-bc v1 (start)", None, "default-bc v1"),
        ("best-of-4 over default-bc v1", 4, "default-bc v1"),
        ("default-bc v1 (start) at T=0.7, best on dev", None, "default-bc v1 at T=0.7"),
        ("ppo-3 iteration 2", None, "ppo-3 iteration 2"),
    ],
)
def test_an_evaluation_rows_name_does_not_repeat_its_badges(label, n, name):
    assert row_name(EvaluationEntry(label=label, n=n)) == name
