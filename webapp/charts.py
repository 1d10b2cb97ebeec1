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
