"""Template helpers: safe Markdown, and small formatting filters."""

import unicodedata

from django import template
from django.template.defaultfilters import stringfilter, truncatechars
from django.utils.safestring import mark_safe

from core.figures import rate_text, share_text
from core.markdown import markdown_html
from webapp.roles import annotator_label

register = template.Library()


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown to sanitized HTML (core/markdown.py), safe to show as it is."""
    return mark_safe(markdown_html(text))


def _is_number(value) -> bool:
    """Missing figures (None, or "" for a key a template could not find) print as a dash."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@register.filter
def percent(value) -> str:
    return share_text(value)


@register.filter
def number(value, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if _is_number(value) else "–"


def _figure_text(value: float, style: str) -> str:
    if style == "percent":
        return f"{100 * value:.1f}"
    if style == "points":
        return f"{100 * value:+.1f}"
    return f"{value:.{int(style)}f}"


# Below this many units (tasks, comparisons) no interval is shown: a percentile bootstrap over
# a handful of items reads as certainty ("100.0% [100.0, 100.0] (3)").
MIN_INTERVAL_UNITS = 10


@register.filter
def interval(figure, style: str = "2") -> str:
    """A figure {mean (or value), low, high} as "mean [low, high]", the interval kept on one line.
    `style`: "percent" (a share, in %), "points" (a signed difference of shares, in percentage
    points) or a number of digits. Only formatted numbers reach the markup."""
    if not isinstance(figure, dict):
        return "–"
    mean = figure.get("mean", figure.get("value"))
    if not _is_number(mean):
        return "–"
    unit = {"percent": "%", "points": " pts"}.get(style, "")
    text = _figure_text(mean, style) + unit
    low, high = figure.get("low"), figure.get("high")
    n = next((figure[k] for k in ("units", "tasks", "n") if isinstance(figure.get(k), int)), None)
    if n is not None and n < MIN_INTERVAL_UNITS:
        # A bootstrap over 2 or 3 items gives [100, 100] for 3 of 3: certainty it does not have.
        text += f' <span class="ci too-few">(too few for an interval: n = {n})</span>'
    elif _is_number(low) and _is_number(high):
        text += f' <span class="ci">[{_figure_text(low, style)}, {_figure_text(high, style)}]</span>'
    return mark_safe(text)


@register.filter(is_safe=True)
@stringfilter
def clip(text: str, length) -> str:
    """Django's `truncatechars`, the same text, without its walk over every character of a text
    that is short enough to keep whole (that walk over the judge page's 100 prompts and answers
    was half the page's time)."""
    try:
        limit = int(length)
    except ValueError:
        return text
    whole = unicodedata.normalize("NFC", text)
    # A combining character does not count, so a text no longer than the limit is never cut.
    return whole if 0 < limit and len(whole) <= limit else truncatechars(text, limit)


@register.filter
def startswith(text, prefix: str) -> bool:
    """`request.path|startswith:"/runs/"`: marks the top bar's link to the section a page is in."""
    return isinstance(text, str) and text.startswith(prefix)


@register.filter
def annotator_for(user, viewer) -> str:
    """`{{ judgement.annotator|annotator_for:request.user }}`: webapp.roles.annotator_label."""
    return annotator_label(viewer, user.pk, user.username) if user is not None else "–"


@register.filter
def lease_clock(seconds) -> str:
    """Seconds left as a clock: "14:32", "0:30", "1:02:05" (never "0 min" for 30 s)."""
    try:
        total = max(0, int(seconds))
    except (TypeError, ValueError):
        return "–"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


SELF_STOPS = {
    "collapse": "stopped itself: collapse",
    "kl_budget": "stopped itself: KL budget",
    "time_limit": "stopped at its time limit",
}


@register.filter
def self_stop(run) -> str:
    """Words for a run that ended by its own rule before its planned end (RL's collapse guard, the
    KL budget), shown beside its status so "succeeded" never reads as "did all it was asked"."""
    summary = getattr(run, "summary", None) or {}
    return SELF_STOPS.get(summary.get("stop_reason", "") if isinstance(summary, dict) else "", "")


@register.filter
def duration(seconds) -> str:
    """A span of time in the unit a person reads it in: "30 s", "15 min", "1 h 30 min", "3 days"."""
    if not _is_number(seconds):
        return "–"
    total = max(0, round(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        minutes, secs = divmod(total, 60)
        return f"{minutes} min" + (f" {secs} s" if secs and minutes < 10 else "")
    if total < 2 * 86400:
        hours, minutes = divmod(round(total / 60), 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days = total / 86400
    return f"{days:.0f} days" if days < 365 else "over a year"


@register.filter
def minutes(value) -> str:
    """A number of minutes in `duration`'s words ("40 s", "12 min"): never "about 0 min"."""
    return duration(value * 60) if _is_number(value) else "–"


@register.filter
def eta(hours) -> str:
    """When a campaign finishes at its pace, in words: "in about 45 min", "in about 3 days", or
    that at this pace it will not finish within a year (never "in about 7176.0 h")."""
    if not _is_number(hours):
        return "–"
    if hours * 3600 >= 365 * 86400:
        return "not within a year at this pace"
    return f"in about {duration(hours * 3600)}"


@register.filter
def pace(per_hour) -> str:
    """Judgements per hour as a person reads them, always per hour: "12.5/h", "0.92/h", or "–"."""
    return rate_text(per_hour)
