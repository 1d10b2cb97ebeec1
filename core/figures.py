"""How a figure is written where people read it (pages, logs, dataset cards): one formatter for
a share and one for a rate, so a page never shows "0.8115942028985508" beside "81.2%", or
"about 22 a day" beside "30.9/h" (issue 53). The template filters `percent` and `pace`
(webapp/templatetags/arbiter.py) are these.
"""

from __future__ import annotations

DASH = "–"  # a missing figure


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def share_text(value, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage: 0.8115942 -> "81.2%"; a missing one as a dash."""
    return f"{100 * value:.{digits}f}%" if _is_number(value) else DASH


def rate_text(per_hour) -> str:
    """Judgements (or anything) per hour, always per hour so two rates side by side compare:
    30.94 -> "30.9/h", 0.9167 -> "0.92/h", 0.0417 -> "0.042/h"; nothing yet -> a dash (never
    "0.0/h")."""
    if not _is_number(per_hour) or per_hour <= 0:
        return DASH
    if per_hour >= 1:
        return f"{per_hour:.1f}/h"
    if per_hour < 0.001:
        return "under 0.001/h"
    return f"{per_hour:.2g}/h"
