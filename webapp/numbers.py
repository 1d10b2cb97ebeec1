"""How numbers are written for people: three significant digits, thousands separators, units.

One place for the charts, the run page's result table and the axis ticks, so `0.8123` is
"81.2%" wherever an accuracy is shown and `213456.0` tokens are "213,456" and not "2.13e+05".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

SECONDS, PERCENT = "s", "%"

# Metric leaves that are shares (0..1) and read better as percentages.
_SHARE = re.compile(r"(accuracy|success|clipfrac|agreement|share|win_rate|left_rate|_frac|fraction)$")
_TIME = re.compile(r"(^|_)(seconds|secs|runtime|duration|elapsed)$|_s$")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def metric_unit(name: str, values: Iterable = ()) -> str:
    """The unit of a metric by its name: seconds for `time/...` and `..._seconds`; a percentage for
    shares (accuracy, success, clipfrac, ...) when every value lies in 0..1; else none."""
    parts = name.lower().replace(".", "/").split("/")
    leaf = parts[-1].strip()
    if parts[0] == "time" or _TIME.search(leaf):
        return SECONDS
    if "learning_rate" in leaf or leaf == "lr":
        return ""
    if _SHARE.search(leaf):
        numbers = [v for v in values if is_number(v) and math.isfinite(v)]
        if numbers and all(0 <= v <= 1 for v in numbers):
            return PERCENT
    return ""


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e15 or magnitude < 1e-3:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    if float(value).is_integer() and magnitude < 1e6:
        return f"{int(value):,}"  # counts stay exact: 213,456 tokens
    if magnitude >= 10 ** (digits - 1):
        # Round to `digits` significant digits, then write the whole number with separators.
        rounded = round(value, digits - 1 - int(math.floor(math.log10(magnitude))))
        return f"{int(rounded):,}"
    return f"{value:.{digits}g}"


def readable_number(value, unit: str = "", digits: int = 3) -> str:
    """`value` with `digits` significant digits, thousands separators and its unit; "–" when missing."""
    if not is_number(value) or not math.isfinite(value):
        return "–"
    if unit == PERCENT:
        return f"{_significant(100 * value, digits)}%"
    text = _significant(value, digits)
    return f"{text} {unit}" if unit else text


def readable_key(key: str) -> str:
    """`reward_model_id` -> "reward model id"; `eval/dev_success` -> "eval / dev success"."""
    text = str(key).replace("_", " ").replace("/", " / ").strip()
    return re.sub(r"\s+", " ", text) or str(key)
