"""The server-drawn SVG charts and how numbers are written: readable values, one axis per metric,
labels that fit and still differ, a visible point for a one-point series, a hover value per point."""

import re

from webapp.charts import bar_chart_svg, histogram_svg, line_chart_svg, metric_charts, nice_ticks, shorten_labels
from webapp.numbers import metric_unit, readable_number


def test_numbers_have_three_significant_digits_separators_and_units():
    assert readable_number(213456.0) == "213,456"  # a count stays exact
    assert readable_number(213456.7) == "213,000"
    assert readable_number(0.81234) == "0.812" and readable_number(0.81234, "%") == "81.2%"
    assert readable_number(93.27, "s") == "93.3 s" and readable_number(1234.5, "s") == "1,230 s"
    assert (
        readable_number(2.5e-6) == "2.5e-06" and readable_number(None) == "–" and readable_number(float("nan")) == "–"
    )


def test_units_come_from_the_metric_name():
    assert metric_unit("time/rollout", [3.0]) == "s" and metric_unit("train/train_seconds", [1]) == "s"
    assert metric_unit("train/accuracy", [0.5, 0.9]) == "%" and metric_unit("eval/dev_success", [0.3]) == "%"
    assert metric_unit("train/accuracy", [3.0]) == ""  # not a share after all
    assert metric_unit("train/learning_rate", [1e-4]) == "" and metric_unit("train/num_tokens", [2e5]) == ""


def test_ticks_are_round_and_cover_the_data():
    ticks = nice_ticks(0.013, 0.97)
    assert ticks[0] <= 0.013 and ticks[-1] >= 0.97 and ticks == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert nice_ticks(3, 3)[0] < 3 < nice_ticks(3, 3)[-1]  # a flat series still gets an axis
    assert nice_ticks(0, 0)[0] == 0 and nice_ticks(0, 0)[-1] == 1  # all zeros (√KL at the start): 0 to 1
    assert nice_ticks(-2, -2)[0] < -2 < nice_ticks(-2, -2)[-1]


def test_shortened_labels_still_differ():
    names = ["sim-annotator-1", "sim-annotator-2", "sim-annotator-3"]
    short = shorten_labels(names, 12)
    assert len(set(short)) == 3 and all(len(s) <= 12 and "…" in s for s in short)
    assert shorten_labels(["a", "b"], 12) == ["a", "b"]


def _shown_labels(svg: str) -> list[str]:
    """The x labels as drawn (their text, without the <title> that holds the full label)."""
    return [re.sub(r"<title>.*?</title>|<[^>]+>", "", m) for m in re.findall(r'class="tick x-label">(.*?)</text>', svg)]


def test_bar_labels_fit_or_turn_and_keep_their_full_text_on_hover():
    names = ["sim-annotator-1", "sim-annotator-2", "sim-annotator-3"]
    svg = str(bar_chart_svg(names, [0.7, 0.8, 0.66], title="Agreement", max_value=1, unit="%"))
    assert _shown_labels(svg) == names  # three bars have room for the whole names
    assert "sim-annotator-2: 80%</title>" in svg and ">100%</text>" in svg
    many = [f"annotator-with-a-long-name-{i}" for i in range(12)]
    svg = str(bar_chart_svg(many, list(range(12)), title="Many"))
    shown = _shown_labels(svg)
    assert "rotate(-45)" in svg and len(set(shown)) == len(shown) == 12
    assert all(f"<title>{name}</title>" in svg for name in many)
    bins = [f"0.{i}0–0.{i + 1}0 (n={10 + i})" for i in range(5, 9)]
    svg = str(bar_chart_svg(bins, [0.5, 0.6, 0.7, 0.8], title="Reliability", max_value=1, unit="%", width=400))
    assert _shown_labels(svg) == [b.replace(" ", "") for b in bins] and "rotate" not in svg  # on two lines
    assert svg.count("<tspan") == 8


def test_a_histogram_labels_its_bins_and_says_the_unit_on_hover():
    svg = str(histogram_svg([5.0, 6.0, 7.5, 30.0], title="Seconds per comparison", bins=5, unit="s"))
    assert "5 to 10 s: 3</title>" in svg


def test_a_one_point_series_shows_its_point_with_its_value():
    svg = str(line_chart_svg({"eval/accuracy": [(390, 0.8123)]}, title="accuracy", metric="eval/accuracy"))
    assert "<polyline" not in svg and svg.count("<circle") == 1
    assert "eval/accuracy: 81.2% at step 390</title>" in svg and 'data-metric="eval/accuracy"' in svg


def test_a_long_series_has_hover_targets_and_gaps_for_missing_values():
    points = [(i, None if i == 50 else float(i)) for i in range(200)]
    svg = str(line_chart_svg({"loss/total": points}, title="total"))
    assert svg.count("<polyline") == 2  # the missing value breaks the line
    assert 60 <= svg.count('class="hit"') <= 90 and "loss/total: 199 at step 199" in svg


def test_metrics_get_one_chart_each_grouped_by_namespace_in_reading_order():
    series = {
        name: [(1, 1.0), (2, 2.0)]
        for name in ("train/loss", "train/num_tokens", "objective/kl", "loss/value", "zzz/custom", "lonely", "eval/acc")
    }
    groups = metric_charts(series)
    assert [g["namespace"] for g in groups] == ["objective", "eval", "loss", "train", "zzz", "other"]
    assert sum(len(g["charts"]) for g in groups) == len(series)
    train = next(g for g in groups if g["namespace"] == "train")
    assert [c["name"] for c in train["charts"]] == ["train/loss", "train/num_tokens"]
    assert all(str(c["svg"]).count("<svg") == 1 for g in groups for c in g["charts"])
    empty = metric_charts({"eval/never": [(1, None)]})[0]["charts"][0]["svg"]
    assert "<svg" in str(empty) and "no finite values" in str(empty)


def test_labels_are_escaped():
    svg = str(bar_chart_svg(["<script>x</script>"], [1], title="<b>t</b>"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "<b>" not in svg
