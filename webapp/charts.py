"""Small SVG charts rendered on the server: no JavaScript, nothing from a CDN, CSP-safe.

Every chart has its own y axis with round ticks written by `webapp.numbers` (three
significant digits, thousands separators, a unit where one is known), a hover text per
point or bar (an SVG `<title>`), and labels that fit: an x label is written straight when it
fits its slot, on two lines when its words do, else turned 45° and, past a length,
shortened in the middle so that labels still differ; its full text is its `<title>`.

Labels are escaped; only numbers reach coordinates. Sizes are in viewBox units, which CSS
scales to the card (`svg.chart` in arbiter.css).
"""

from __future__ import annotations

import math

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from webapp.numbers import is_number, metric_unit, readable_number

WIDTH, HEIGHT = 400, 230  # a chart's viewBox; small multiples are narrower (METRIC_WIDTH)
METRIC_WIDTH, METRIC_HEIGHT = 360, 200
FONT, TITLE_FONT = 11, 13  # tick and title sizes, as in arbiter.css
CHAR = 0.6  # average glyph width, in ems, of the tick font: an upper bound for digits and lowercase
TOP, RIGHT = 30, 14
ROTATED_MAX_CHARS = 22  # a turned label longer than this is shortened in the middle
POINTS_SHOWN = 40  # series up to this long draw a dot per point; longer ones get hover targets
HOVER_TARGETS = 80
# Namespaces of metric keys in the order a reader looks for them (STYLE.md 13); others follow by name.
NAMESPACE_ORDER = ("objective", "eval", "episode", "loss", "policy", "value", "train", "optim", "time")


def text_width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR


def _fit(text: str, width: float, size: float = FONT) -> str:
    """`text` cut with an ellipsis to fit `width` (the caller keeps the full text as a <title>)."""
    if text_width(text, size) <= width:
        return text
    keep = max(1, int(width / (size * CHAR)) - 1)
    return text[:keep] + "…"


def shorten_labels(labels: list[str], max_chars: int) -> list[str]:
    """Labels longer than `max_chars` shortened in the middle ("sim-ann…tor-1"), keeping enough of
    their ends that labels which differed still differ."""
    if all(len(label) <= max_chars for label in labels):
        return list(labels)
    distinct = len(set(labels))
    out = list(labels)
    for tail in range(max(2, max_chars // 3), max_chars - 1):
        head = max_chars - 1 - tail
        out = [label if len(label) <= max_chars else label[:head] + "…" + label[-tail:] for label in labels]
        if len(set(out)) == distinct:
            return out
    return out


def _wrap(label: str, width: float, lines: int = 2) -> list[str] | None:
    """`label` broken at spaces into at most `lines` lines that each fit `width`; None if it cannot."""
    words, rows = label.split(), [""]
    for word in words:
        candidate = f"{rows[-1]} {word}".strip()
        if text_width(candidate) <= width:
            rows[-1] = candidate
        elif rows[-1] and text_width(word) <= width and len(rows) < lines:
            rows.append(word)
        else:
            return None
    return rows if rows != [""] else None


def nice_ticks(lo: float, hi: float, count: int = 4, *, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten) covering lo..hi."""
    if lo == hi == 0:  # all zeros (a KL before the policy moved, a count of errors): 0 to 1, nothing below
        lo, hi = 0.0, 1.0
    elif lo == hi:
        pad = abs(lo) * 0.1
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, round(step))
    start, end = math.floor(lo / step) * step, math.ceil(hi / step) * step
    n = int(round((end - start) / step))
    return [round(start + i * step, 12) for i in range(n + 1)]


def _open(width: float, height: float, title: str, *, css: str = "chart", data: str = "") -> list[str]:
    return [
        f'<svg class="{css}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(title)}"{data}>',
        f"<title>{escape(title)}</title>",
    ]


def _title(parts: list[str], title: str, width: float, *, right: str = "") -> None:
    room = width - 8 - (text_width(right, FONT) + 12 if right else 0)
    shown = _fit(title, room, TITLE_FONT)
    parts.append(
        f'<text x="4" y="16" class="chart-title">{escape(shown)}'
        f"{'<title>' + escape(title) + '</title>' if shown != title else ''}</text>"
    )
    if right:
        parts.append(f'<text x="{width - 4:.0f}" y="16" text-anchor="end" class="tick latest">{escape(right)}</text>')


def _y_axis(parts: list[str], ticks: list[float], to_y, left: float, right: float, unit: str) -> None:
    for t in ticks:
        y = to_y(t)
        parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" class="gridline"/>')
        parts.append(
            f'<text x="{left - 5:.1f}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(readable_number(t, unit))}</text>"
        )


def _y_pad(ticks: list[float], unit: str) -> float:
    return max(text_width(readable_number(t, unit)) for t in ticks) + 10


def _no_data(title: str, *, width: float = WIDTH, data: str = "", svg: bool = False) -> SafeString:
    if not svg:
        return mark_safe(f'<p class="muted">{escape(title)}: no data yet.</p>')
    parts = _open(width, 60, title, data=data)
    _title(parts, title, width)
    parts.append('<text x="4" y="42" class="tick">no finite values yet</text></svg>')
    return mark_safe("".join(parts))


# --- Bars ------------------------------------------------------------------------------------


def _label_band(labels: list[str], slot: float) -> dict:
    """How x labels are written under bars `slot` wide: straight, wrapped or turned."""
    room = slot - 4
    if all(text_width(label) <= room for label in labels):
        return {"mode": "straight", "lines": [[label] for label in labels], "height": FONT + 8, "every": 1}
    wrapped = [_wrap(label, room) for label in labels]
    if all(wrapped):
        return {"mode": "wrapped", "lines": wrapped, "height": 2 * (FONT + 2) + 8, "every": 1}
    shown = shorten_labels(labels, ROTATED_MAX_CHARS)
    # Turned 45°, neighbours sit slot·sin45 apart: keep one label in `every` so they never overlap.
    every = max(1, math.ceil((FONT + 3) / (slot * math.sin(math.pi / 4))))
    longest = max(text_width(s) for s in shown)
    return {
        "mode": "turned",
        "lines": [[s] for s in shown],
        "every": every,
        "height": longest * math.sin(math.pi / 4) + FONT + 10,
        "widths": [text_width(s) for s in shown],
    }


def bar_chart_svg(
    labels: list[str],
    values: list[float],
    *,
    title: str,
    max_value: float | None = None,
    unit: str = "",
    hover: list[str] | None = None,
    width: float = WIDTH,
    plot_height: float = 150,
) -> SafeString:
    """Bars with their labels under them. `unit` writes the values ("%": shares shown as percentages,
    "s": seconds); `hover` replaces the "label: value" hover text per bar."""
    if not values:
        return _no_data(title)
    labels = [str(label) for label in labels]
    numbers = [float(v) if is_number(v) and math.isfinite(v) else 0.0 for v in values]
    integer = all(float(v).is_integer() for v in numbers) and unit != "%"
    hi = max_value if max_value is not None else max(numbers)
    ticks = nice_ticks(min(0.0, min(numbers)), hi or 1.0, integer=integer)
    if max_value is not None:
        ticks = [t for t in ticks if t <= max_value] or [0.0, max_value]
    lo, top = ticks[0], max(ticks[-1], max_value or 0)
    left = _y_pad(ticks, unit)
    band = _label_band(labels, (width - left - RIGHT) / len(numbers))
    if band["mode"] == "turned":  # make room on the left for the first labels, which lean left
        for _ in range(2):
            slot = (width - left - RIGHT) / len(numbers)
            need = max(w * math.cos(math.pi / 4) - (i + 0.5) * slot for i, w in enumerate(band["widths"])) + 4
            left = min(width * 0.45, max(left, need))
            band = _label_band(labels, (width - left - RIGHT) / len(numbers))
    slot = (width - left - RIGHT) / len(numbers)
    bottom = TOP + plot_height
    height = bottom + band["height"] + 4
    bar_w = max(1.5, slot * 0.7)

    def to_y(v: float) -> float:
        return bottom - plot_height * (v - lo) / ((top - lo) or 1.0)

    parts = _open(width, height, title)
    _title(parts, title, width)
    _y_axis(parts, ticks, to_y, left, width - RIGHT, unit)
    parts.append(f'<line x1="{left:.1f}" y1="{to_y(0):.1f}" x2="{width - RIGHT:.1f}" y2="{to_y(0):.1f}" class="axis"/>')
    for i, (label, value) in enumerate(zip(labels, numbers)):
        x = left + i * slot + (slot - bar_w) / 2
        y0, y1 = sorted((to_y(0), to_y(value)))
        text = hover[i] if hover else f"{label}: {readable_number(value, unit)}"
        parts.append(
            f'<rect x="{x:.1f}" y="{y0:.1f}" width="{bar_w:.1f}" height="{max(y1 - y0, 0.5):.1f}" '
            f'class="bar"><title>{escape(text)}</title></rect>'
        )
        if i % band["every"]:
            continue
        cx = left + (i + 0.5) * slot
        lines, full = band["lines"][i], f"<title>{escape(label)}</title>"
        if band["mode"] == "turned":
            parts.append(
                f'<text transform="translate({cx:.1f},{bottom + 12:.1f}) rotate(-45)" text-anchor="end" '
                f'class="tick x-label">{full}{escape(lines[0])}</text>'
            )
        else:
            spans = "".join(
                f'<tspan x="{cx:.1f}" dy="{0 if n == 0 else FONT + 2}">{escape(line)}</tspan>'
                for n, line in enumerate(lines)
            )
            parts.append(
                f'<text x="{cx:.1f}" y="{bottom + FONT + 3:.1f}" text-anchor="middle" '
                f'class="tick x-label">{full}{spans}</text>'
            )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def histogram_svg(values: list[float], *, title: str, bins: int = 10, unit: str = "") -> SafeString:
    """Counts of `values` in `bins` equal bins; each bar is labelled by its bin's start."""
    values = [v for v in values if is_number(v) and math.isfinite(v)]
    if not values:
        return _no_data(title)
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    labels = [readable_number(lo + i * width) for i in range(bins)]  # the unit is in the hover text and the title
    hover = [
        f"{readable_number(lo + i * width)} to {readable_number(lo + (i + 1) * width, unit)}: {n}"
        for i, n in enumerate(counts)
    ]
    return bar_chart_svg(labels, counts, title=title, hover=hover)


# --- Lines -----------------------------------------------------------------------------------


def _legend(names: list[str], width: float) -> list[list[tuple[int, float, str]]]:
    """Legend entries (series index, x, shown text) laid out in rows that fit `width`."""
    rows: list[list] = [[]]
    x = 4.0
    for i, name in enumerate(names):
        shown = _fit(name, width - 30)
        need = 16 + text_width(shown) + 12
        if rows[-1] and x + need > width:
            rows.append([])
            x = 4.0
        rows[-1].append((i, x, shown))
        x += need
    return rows


def _x_ticks(parts: list[str], ticks: list[float], to_x, y: float, left: float, right: float, x_label: str) -> None:
    placed: list[tuple[float, float]] = []
    for n, t in enumerate(ticks):
        text = readable_number(t) + (f" {x_label}" if n == len(ticks) - 1 and x_label else "")
        x, w = to_x(t), text_width(text)
        anchor, start = "middle", x - w / 2
        if start < left - 6:
            anchor, start = "start", x
        elif x + w / 2 > right + 6:
            anchor, start = "end", x - w
        if any(start < end + 6 and start + w > begin - 6 for begin, end in placed):
            continue  # it would overlap a tick already written
        placed.append((start, start + w))
        parts.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" class="tick">{escape(text)}</text>')


def _segments(points: list[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Runs of finite points: a missing value (None) breaks the line."""
    runs: list[list] = [[]]
    for x, y in points:
        if y is None or not is_number(y) or not math.isfinite(y):
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((float(x), float(y)))
    return [r for r in runs if r]


def line_chart_svg(
    series: dict[str, list[tuple[float, float | None]]],
    *,
    title: str,
    x_label: str = "step",
    markers: list[tuple[float, str]] | None = None,
    x_range: tuple[float, float] | None = None,
    unit: str | None = None,
    width: float = WIDTH,
    height: float = HEIGHT,
    metric: str = "",
    latest: bool = False,
) -> SafeString:
    """Lines of (x, y) points sharing both axes; `markers` are labelled vertical lines at x.

    `x_range` fixes the x axis, so charts drawn side by side line up. `unit` writes the y
    values (None: guessed from a single series' name). A series up to POINTS_SHOWN points
    long draws a dot per point (one point is a dot); every dot, or a hover target on longer
    series, has its value as hover text. `metric` marks the chart (`data-metric`) and keeps
    it an SVG even without data; `latest` writes the last value beside the title.
    """
    data = f' data-metric="{escape(metric)}"' if metric else ""
    runs = {name: _segments(points) for name, points in series.items()}
    finite = [p for segments in runs.values() for run in segments for p in run]
    if not finite:
        return _no_data(title, width=width, data=data, svg=bool(metric))
    if unit is None:
        unit = metric_unit(next(iter(series)), [y for _, y in finite]) if len(series) == 1 else ""
    ys = [p[1] for p in finite]
    x_lo, x_hi, x_ticks = _x_axis([p[0] for p in finite], x_range)
    y_ticks = nice_ticks(min(ys), max(ys))
    y_lo, y_hi = y_ticks[0], y_ticks[-1]
    names = list(series)
    legend = _legend(names, width) if len(names) > 1 else []
    legend_h = 16 * len(legend)
    left = _y_pad(y_ticks, unit)
    right = width - RIGHT
    height = max(height, TOP + 90 + 22 + legend_h)
    bottom = height - 22 - legend_h

    def to_x(x: float) -> float:
        return left + (right - left) * (x - x_lo) / ((x_hi - x_lo) or 1.0)

    def to_y(y: float) -> float:
        return bottom - (bottom - TOP) * (y - y_lo) / ((y_hi - y_lo) or 1.0)

    parts = _open(width, height, title, data=data)
    last_name = names[-1]
    last = [p for run in runs[last_name] for p in run][-1] if runs[last_name] else None
    _title(parts, title, width, right=f"last {readable_number(last[1], unit)}" if latest and last else "")
    _y_axis(parts, y_ticks, to_y, left, right, unit)
    parts.append(f'<line x1="{left:.1f}" y1="{bottom:.1f}" x2="{right:.1f}" y2="{bottom:.1f}" class="axis"/>')
    _x_ticks(parts, x_ticks, to_x, bottom + FONT + 4, left, right, x_label)
    for x, label in markers or []:
        if x_lo <= x <= x_hi:
            pos = to_x(x)
            parts.append(
                f'<line x1="{pos:.1f}" y1="{TOP}" x2="{pos:.1f}" y2="{bottom:.1f}" class="marker">'
                f"<title>{escape(label)}</title></line>"
            )
    for i, name in enumerate(names):
        points = [p for run in runs[name] for p in run]
        for run in runs[name]:
            if len(run) > 1:
                path = " ".join(f"{to_x(x):.1f},{to_y(y):.1f}" for x, y in run)
                parts.append(
                    f'<polyline points="{path}" class="line line-{i % 6}"><title>{escape(name)}</title></polyline>'
                )
        if len(points) <= POINTS_SHOWN:
            shown, css, radius = points, f"point point-{i % 6}", 2.6
        else:
            every = math.ceil(len(points) / HOVER_TARGETS)
            shown, css, radius = points[::every] + ([points[-1]] if (len(points) - 1) % every else []), "hit", 5
        for x, y in shown:
            text = f"{name}: {readable_number(y, unit)} at {x_label} {readable_number(x)}".replace(" at  ", " at ")
            parts.append(
                f'<circle cx="{to_x(x):.1f}" cy="{to_y(y):.1f}" r="{radius}" class="{css}">'
                f"<title>{escape(text)}</title></circle>"
            )
    _legend_rows(parts, legend, names, bottom)
    parts.append("</svg>")
    return mark_safe("".join(parts))


def _x_axis(xs: list[float], x_range: tuple[float, float] | None) -> tuple[float, float, list[float]]:
    """(low, high, ticks) of a line chart's x axis: `x_range` where given, else tight to the data
    with round ticks inside it."""
    integer_x = all(x.is_integer() for x in xs)
    if x_range:
        x_lo, x_hi = x_range
        return x_lo, x_hi, [t for t in nice_ticks(x_lo, x_hi, integer=integer_x) if x_lo <= t <= x_hi]
    if min(xs) == max(xs):
        return min(xs) - 1, max(xs) + 1, [min(xs)]
    x_ticks = nice_ticks(min(xs), max(xs), integer=integer_x)
    if len(x_ticks) > 2:  # keep the axis tight to the data: round ticks inside, the data's ends as bounds
        return min(xs), max(xs), [t for t in x_ticks if min(xs) <= t <= max(xs)]
    return x_ticks[0], x_ticks[-1], x_ticks


def _legend_rows(parts: list, legend: list, names: list[str], bottom: float) -> None:
    """The legend's rows under the chart: a swatch and each series' name (its full name on hover)."""
    for row_number, row in enumerate(legend):
        y = bottom + 22 + 16 * row_number + 8
        for i, x, shown in row:
            full = f"<title>{escape(names[i])}</title>" if shown != names[i] else ""
            parts.append(
                f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="12" height="4" class="legend-{i % 6}"/>'
                f'<text x="{x + 16:.1f}" y="{y:.1f}" class="legend legend-{i % 6}">'
                f"{full}{escape(shown)}</text>"
            )


# --- A run's metrics as small multiples --------------------------------------------------------


def metric_namespace(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "other"


def metric_charts(series: dict[str, list[tuple[float, float | None]]]) -> list[dict]:
    """One chart per metric with its own y axis, grouped by namespace (`objective/`, `loss/`, ...):
    [{"namespace", "charts": [{"name", "svg"}]}] in NAMESPACE_ORDER, then by name."""
    groups: dict[str, list[str]] = {}
    for name in sorted(series):
        groups.setdefault(metric_namespace(name), []).append(name)

    def rank(namespace: str) -> tuple:
        known = NAMESPACE_ORDER.index(namespace) if namespace in NAMESPACE_ORDER else len(NAMESPACE_ORDER)
        return namespace == "other", known, namespace

    return [
        {
            "namespace": namespace,
            "charts": [
                {
                    "name": name,
                    "svg": line_chart_svg(
                        {name: series[name]},
                        title=name.split("/", 1)[-1],
                        metric=name,
                        width=METRIC_WIDTH,
                        height=METRIC_HEIGHT,
                        latest=True,
                    ),
                }
                for name in groups[namespace]
            ],
        }
        for namespace in sorted(groups, key=rank)
    ]


def interval_chart_svg(
    rows: list[tuple[str, float | None, float | None, float | None]],
    *,
    title: str,
    lo: float = 0.0,
    hi: float = 1.0,
    unit: str = "%",
    width: float = WIDTH,
) -> SafeString:
    """One row per (label, value, low, high): a dot at the value and a line over its interval,
    on a shared horizontal axis from `lo` to `hi` (a row without a value says "no data")."""
    if not rows:
        return _no_data(title, width=width)
    row_height, label_width = 26, min(160.0, max(text_width(str(r[0])) for r in rows) + 12)
    height = TOP + row_height * len(rows) + 28
    ticks = nice_ticks(lo, hi)
    # The last tick's label is centred on the axis' end: leave room for its right half.
    left, right = label_width, width - max(RIGHT, text_width(readable_number(ticks[-1], unit)) / 2 + 4)

    def to_x(v: float) -> float:
        return left + (min(hi, max(lo, v)) - lo) / ((hi - lo) or 1) * (right - left)

    parts = _open(width, height, title)
    _title(parts, title, width)
    axis_y = TOP + row_height * len(rows) + 4
    for t in ticks:
        x = to_x(t)
        parts.append(f'<line class="gridline" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{axis_y:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{axis_y + 14:.1f}" text-anchor="middle">'
            f"{escape(readable_number(t, unit))}</text>"
        )
    for i, (label, value, low, high) in enumerate(rows):
        y = TOP + row_height * i + row_height / 2
        shown = escape(_fit(str(label), label_width - 8))
        parts.append(f'<text class="tick" x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{shown}</text>')
        if not is_number(value) or not math.isfinite(value):
            parts.append(f'<text class="tick" x="{left + 4:.1f}" y="{y + 4:.1f}">no data</text>')
            continue
        hover = f"{label}: {readable_number(value, unit)}"
        if is_number(low) and is_number(high):
            hover += f" ({readable_number(low, unit)} to {readable_number(high, unit)})"
            parts.append(
                f'<line class="line line-{i % 6}" x1="{to_x(low):.1f}" y1="{y:.1f}" x2="{to_x(high):.1f}" '
                f'y2="{y:.1f}" stroke-width="3"/>'
            )
        parts.append(
            f'<circle class="point point-{i % 6}" cx="{to_x(value):.1f}" cy="{y:.1f}" r="5">'
            f"<title>{escape(hover)}</title></circle>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))
