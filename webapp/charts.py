"""Small SVG charts rendered on the server: no JavaScript, nothing from a CDN, CSP-safe.

Labels are escaped; only numbers reach coordinates.
"""
from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 560, 220, 40, 48, 24


def bar_chart_svg(labels: list[str], values: list[float], *, title: str,
                  max_value: float | None = None) -> SafeString:
    if not values:
        return mark_safe(f'<p class="muted">{escape(title)}: no data yet.</p>')
    top = max_value or max(values) or 1
    plot_w, plot_h = WIDTH - PAD_LEFT - 10, HEIGHT - PAD_BOTTOM - PAD_TOP
    step = plot_w / len(values)
    bar_w = max(2.0, step * 0.7)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{PAD_LEFT}" y="16" class="chart-title">{escape(title)}</text>',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH - 10}" y2="{PAD_TOP + plot_h}" class="axis"/>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + 4}" text-anchor="end" class="tick">{top:g}</text>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end" class="tick">0</text>',
    ]
    every = max(1, len(labels) // 8)
    for i, (label, value) in enumerate(zip(labels, values)):
        h = plot_h * (float(value) / top)
        x = PAD_LEFT + i * step + (step - bar_w) / 2
        parts.append(
            f'<rect x="{x:.1f}" y="{PAD_TOP + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" class="bar">'
            f"<title>{escape(label)}: {value:g}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{PAD_TOP + plot_h + 14}" text-anchor="middle" class="tick">'
                f"{escape(str(label)[:12])}</text>"
            )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def histogram_svg(values: list[float], *, title: str, bins: int = 10) -> SafeString:
    if not values:
        return bar_chart_svg([], [], title=title)
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    labels = [f"{lo + i * width:.3g}" for i in range(bins)]
    return bar_chart_svg(labels, counts, title=title)


def line_chart_svg(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str = "step",
                   markers: list[tuple[float, str]] | None = None,
                   x_range: tuple[float, float] | None = None) -> SafeString:
    """Lines of (x, y) points sharing both axes; `markers` are labelled vertical lines at x.
    `x_range` fixes the x axis, so charts drawn side by side line up."""
    points = [p for values in series.values() for p in values if p[1] is not None]
    if not points:
        return mark_safe(f'<p class="muted">{escape(title)}: no data yet.</p>')
    x_lo, x_hi = x_range or (min(p[0] for p in points), max(p[0] for p in points))
    y_lo, y_hi = min(p[1] for p in points), max(p[1] for p in points)
    x_span, y_span = (x_hi - x_lo) or 1.0, (y_hi - y_lo) or abs(y_hi) or 1.0
    plot_w, plot_h = WIDTH - PAD_LEFT - 10, HEIGHT - PAD_BOTTOM - PAD_TOP

    def xy(x: float, y: float) -> str:
        return f"{PAD_LEFT + plot_w * (x - x_lo) / x_span:.1f},{PAD_TOP + plot_h * (1 - (y - y_lo) / y_span):.1f}"

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{PAD_LEFT}" y="16" class="chart-title">{escape(title)}</text>',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH - 10}" y2="{PAD_TOP + plot_h}" class="axis"/>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + 4}" text-anchor="end" class="tick">{y_hi:.3g}</text>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end" class="tick">{y_lo:.3g}</text>',
        f'<text x="{PAD_LEFT}" y="{PAD_TOP + plot_h + 14}" class="tick">{x_lo:g}</text>',
        f'<text x="{WIDTH - 10}" y="{PAD_TOP + plot_h + 14}" text-anchor="end" class="tick">{x_hi:g} '
        f"{escape(x_label)}</text>",
    ]
    for x, label in markers or []:
        pos = PAD_LEFT + plot_w * (x - x_lo) / x_span
        parts.append(f'<line x1="{pos:.1f}" y1="{PAD_TOP}" x2="{pos:.1f}" y2="{PAD_TOP + plot_h}" class="marker">'
                     f"<title>{escape(label)}</title></line>")
    legend_x = PAD_LEFT
    for i, (name, values) in enumerate(series.items()):
        kept = [p for p in values if p[1] is not None]
        if kept:
            path = " ".join(xy(x, y) for x, y in kept)
            parts.append(f'<polyline points="{path}" class="line line-{i % 6}"><title>{escape(name)}</title></polyline>')
        parts.append(f'<text x="{legend_x}" y="{HEIGHT - 6}" class="legend legend-{i % 6}">{escape(name)}</text>')
        legend_x += 12 + 7 * len(name)
    parts.append("</svg>")
    return mark_safe("".join(parts))
