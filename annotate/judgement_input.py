"""The one reader of a judgement body: every rule a verdict must meet, with one wording.

Four places take a verdict: the comparison screen's form, the REST API's DRF view, its short
path (annotate/api_fast.py) and the assignment service. Each calls `judgement_parse`, so they
accept and refuse the same bodies and say the same thing: the two API paths answer alike
(tests/annotate/test_judgement_parity.py), and the form shows the API's reasons.

The body is whatever was decoded: an object of the API's fields, or anything else (a list,
a string, null, wrong types at any depth), which is refused with the reason, never an
exception of another kind. Numbers and flags may come as text ("3", "on"), as HTML forms and
multipart bodies send them; an empty text is a field left out. Unknown fields are ignored.

The edges know only the body; the service also knows the comparison, and passes what it asks
(the campaign's rating dimensions and rationale rule, the number of steps on each side), so a
verdict built in Python (the simulated annotators, tests) meets the same rules as one posted.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from annotate.campaign_access import SCALES
from core.ids import INT32_MAX
from core.json_input import type_name
from core.problems import problem
from webapp.errors import ArbiterError

# The 5-point scale in screen terms: (value, text, short text for narrow screens). The service
# stores it in A/B terms through the assignment's sides (annotate.models.Choice).
SCREEN_SCALE = [
    (1, "Left much better", "Left ≫"),
    (2, "Left better", "Left >"),
    (3, "Tie", "Tie"),
    (4, "Right better", "Right >"),
    (5, "Right much better", "Right ≫"),
]
SCALE = range(SCREEN_SCALE[0][0], SCREEN_SCALE[-1][0] + 1)
SCALE_WORDS = ", ".join(f"{value} {text.lower()}" for value, text, _ in SCREEN_SCALE)
SIDES = ("left", "right")
RATING_MAX = SCALES.stop - 1  # the longest scale a rating dimension may have
STEP_MAX = INT32_MAX  # a first wrong step is stored in an integer column
RATIONALE_MAX = 20_000
FIELDS = ("choice", "both_bad", "ratings", "first_wrong_step_left", "first_wrong_step_right", "rationale")
MESSAGES_SHOWN = 5  # problems named in the error's summary; `details` lists up to DETAILS_MAX
DETAILS_MAX = 50

_WHOLE_TEXT = re.compile(r"-?[0-9]{1,20}")
_FLAG_TEXT = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}


@dataclass(frozen=True)
class Verdict:
    """A judgement as the annotator gave it, in screen terms (left/right)."""

    choice: int  # 1 left much better .. 3 tie .. 5 right much better
    both_bad: bool = False
    ratings: dict | None = None  # dimension -> {"left": 1..scale, "right": 1..scale}
    first_wrong_left: int | None = None
    first_wrong_right: int | None = None
    rationale: str = ""

    def body(self) -> dict:
        """The verdict as a judgement body (the API's field names), to be read again by `judgement_parse`."""
        return {
            "choice": self.choice,
            "both_bad": self.both_bad,
            "ratings": self.ratings,
            "first_wrong_step_left": self.first_wrong_left,
            "first_wrong_step_right": self.first_wrong_right,
            "rationale": self.rationale,
        }


def verdict_in_ab_terms(verdict: Verdict, *, left_is_a: bool) -> dict:
    """A verdict given in screen terms (left/right), in A/B terms (`trajectory_a` is A): the
    choice, the first wrong steps and the ratings as a judgement stores them. People's
    verdicts go through it with their assignment's side, judges' with the order they were asked."""
    choice = verdict.choice if left_is_a else 6 - verdict.choice
    wrong_a, wrong_b = (
        (verdict.first_wrong_left, verdict.first_wrong_right)
        if left_is_a
        else (verdict.first_wrong_right, verdict.first_wrong_left)
    )
    ratings = {}
    for dim, sides in (verdict.ratings or {}).items():
        a, b = (sides.get("left"), sides.get("right")) if left_is_a else (sides.get("right"), sides.get("left"))
        ratings[dim] = {k: v for k, v in (("A", a), ("B", b)) if v is not None}
    return {"choice": choice, "first_wrong_step_a": wrong_a, "first_wrong_step_b": wrong_b, "ratings": ratings}


class JudgementInputError(ArbiterError):
    """A judgement that was not stored. `details` lists each problem as {field?, message};
    `accepted` holds the fields that were read without one (by Verdict field name), so that a
    refused form shows them again."""

    def __init__(self, problems: list[dict], *, accepted: dict | None = None):
        messages = [p["message"] for p in problems[:MESSAGES_SHOWN]]
        more = f" (and {len(problems) - MESSAGES_SHOWN} more)" if len(problems) > MESSAGES_SHOWN else ""
        super().__init__(
            "The judgement was not stored: " + "; ".join(messages) + more + ".", details=problems[:DETAILS_MAX]
        )
        self.accepted = accepted or {}


def visible_text(text: str) -> str:
    """The text without whitespace and invisible format characters (zero-width spaces, joiners,
    direction marks: Unicode category Cf): what a reader would see."""
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) != "Cf")


def _absent(value) -> bool:
    """Left out: missing, null, or an empty text (an HTML form's empty input)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _whole(value) -> int | None:
    """An integer sent as a number or as text of ASCII digits (forms send text); None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE_TEXT.fullmatch(value.strip()):
        return int(value)
    return None


def _shown(value) -> str:
    """A refused value in a message: a number or a short text as it is, anything else by its type."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)[:24]
    if isinstance(value, str):
        return repr(value[:24])  # repr escapes control characters and lone surrogates
    return type_name(value)


def _choice(value, problems: list) -> int | None:
    if _absent(value):
        problems.append(
            problem(f"pick a point on the scale (choice {SCALE.start}-{SCALE[-1]}: {SCALE_WORDS})", field="choice")
        )
        return None
    choice = _whole(value)
    if choice not in SCALE:
        problems.append(problem(f"choice must be {SCALE.start}-{SCALE[-1]}, not {_shown(value)}", field="choice"))
        return None
    return choice


def _both_bad(value, problems: list) -> bool | None:
    if _absent(value):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _FLAG_TEXT:
        return _FLAG_TEXT[value.strip().lower()]
    problems.append(problem(f"both_bad must be true or false, not {_shown(value)}", field="both_bad"))
    return None


def _step(value, side: str, count: int | None, problems: list) -> int | None:
    """A first wrong step: an index on that side's trajectory, which has `count` steps (None: unknown here)."""
    if _absent(value):
        return None
    field, step = f"first_wrong_step_{side}", _whole(value)
    if step is None:
        problems.append(
            problem(
                f"first wrong step on the {side}: a step index (a whole number from 0), not {_shown(value)}",
                field=field,
            )
        )
    elif not 0 <= step <= STEP_MAX or (count is not None and step >= count):
        has = (
            ""
            if count is None
            else (f" (that trajectory has steps 0-{count - 1})" if count else " (that trajectory has no steps)")
        )
        problems.append(
            problem(f"first wrong step on the {side}: step {_shown(step)} does not exist{has}", field=field)
        )
    else:
        return step
    return None


def _ratings(value, scales: dict | None, problems: list) -> dict | None:
    """Per dimension, {left, right}: 1 to the dimension's scale (`scales`; None: any dimension,
    up to the longest scale)."""
    if _absent(value):
        return {}
    if not isinstance(value, dict):
        problems.append(
            problem(
                f"ratings must be an object, each dimension's {{left, right}}, not {type_name(value)}", field="ratings"
            )
        )
        return None
    before, out = len(problems), {}
    for dim, sides in value.items():
        dim, field = str(dim)[:60], f"ratings.{str(dim)[:60]}"
        if scales is not None and dim not in scales:
            problems.append(
                problem(
                    f"unknown rating dimension {dim!r} (this campaign has: {', '.join(scales) or 'none'})", field=field
                )
            )
            continue
        if not isinstance(sides, dict):
            problems.append(
                problem(f"rating {dim} must be an object {{left, right}}, not {type_name(sides)}", field=field)
            )
            continue
        top = RATING_MAX if scales is None else scales[dim]
        for side, raw in sides.items():
            side, rating = str(side)[:20], _whole(raw)
            if side not in SIDES:
                problems.append(problem(f"rating {dim}.{side}: the sides are left and right", field=f"{field}.{side}"))
            elif _absent(raw):
                continue  # not rated
            elif rating is None or not 1 <= rating <= top:
                problems.append(
                    problem(f"rating {dim}.{side} must be a value 1-{top}, not {_shown(raw)}", field=f"{field}.{side}")
                )
            else:
                out.setdefault(dim, {})[side] = rating
    return out if len(problems) == before else None


def _required_ratings(ratings: dict, dimensions: list[dict], problems: list) -> None:
    for d in dimensions:
        missing = [side for side in SIDES if side not in ratings.get(d["name"], {})]
        if d.get("required") and missing:
            problems.append(
                problem(
                    f"rate {d['name']} for {' and '.join(missing)} (this campaign requires it)",
                    field=f"ratings.{d['name']}",
                )
            )


def _rationale(value, required: bool, problems: list) -> str | None:
    if value is None:
        value = ""
    if not isinstance(value, str):
        problems.append(problem(f"the rationale must be text, not {type_name(value)}", field="rationale"))
        return None
    text, before = value.strip(), len(problems)
    if len(text) > RATIONALE_MAX:
        problems.append(problem(f"the rationale is over {RATIONALE_MAX:,} characters", field="rationale"))
    elif "\x00" in text:  # what a form may carry; PostgreSQL text cannot hold it
        problems.append(problem("the rationale contains a NUL character, which cannot be stored", field="rationale"))
    elif required and not visible_text(text):
        problems.append(
            problem("this campaign requires a rationale (invisible characters alone are not one)", field="rationale")
        )
    return text if len(problems) == before else None


def judgement_parse(
    body,
    *,
    dimensions: list[dict] | None = None,
    rationale_required: bool = False,
    step_counts: tuple[int, int] | None = None,
) -> Verdict:
    """The body as a Verdict, or `JudgementInputError` with every problem found.

    `dimensions` ([{name, scale, required}], `dimensions_of(campaign)`), `rationale_required`
    and `step_counts` (the steps of the left and the right trajectory) are what the comparison
    asks; without them, a rating may name any dimension and a step any index a column holds.
    """
    if not isinstance(body, dict):
        raise JudgementInputError(
            [{"message": f"a judgement is a JSON object of fields ({', '.join(FIELDS)}), not {type_name(body)}"}]
        )
    problems: list[dict] = []
    left_count, right_count = step_counts or (None, None)
    scales = None if dimensions is None else {d["name"]: d["scale"] for d in dimensions}
    read = {
        "choice": _choice(body.get("choice"), problems),
        "both_bad": _both_bad(body.get("both_bad"), problems),
        "ratings": _ratings(body.get("ratings"), scales, problems),
        "first_wrong_left": _step(body.get("first_wrong_step_left"), "left", left_count, problems),
        "first_wrong_right": _step(body.get("first_wrong_step_right"), "right", right_count, problems),
        "rationale": _rationale(body.get("rationale"), rationale_required, problems),
    }
    if dimensions is not None and read["ratings"] is not None:
        _required_ratings(read["ratings"], dimensions, problems)
    if problems:
        raise JudgementInputError(problems, accepted={k: v for k, v in read.items() if v is not None})
    return Verdict(**read)


# A judgement in progress (annotate.models.JudgementDraft): the verdict form's fields by name, as
# the form holds them (text). Only the form's own names are kept; the values are read for
# real when the judgement is submitted, so a draft may hold what a submit would refuse (a
# rationale not yet long enough, a rating not yet chosen): it is unfinished work.
DRAFT_NAMES = re.compile(r"choice|both_bad|rationale|first_wrong_(left|right)|rating__.{1,100}__(left|right)", re.S)
DRAFT_FIELDS_MAX = 64
DRAFT_VALUE_MAX = 200  # characters of any field but the rationale
DRAFT_MAX_BYTES = 8 * RATIONALE_MAX + 16 * 1024  # a whole rationale, each character escaped in JSON


def draft_parse(body) -> dict[str, str]:
    """A draft body ({"fields": {name: text}}) as its fields, or `ArbiterError` naming every problem."""
    if not isinstance(body, dict) or not isinstance(body.get("fields"), dict):
        shape = type_name(body.get("fields")) if isinstance(body, dict) else type_name(body)
        raise ArbiterError(
            f'The draft was not kept: a draft is an object {{"fields": {{name: text}}}}, not {shape}.',
            details=[problem(f"an object of the form's fields, not {shape}", field="fields")],
        )
    fields = body["fields"]
    problems: list[dict] = []
    if len(fields) > DRAFT_FIELDS_MAX:
        problems.append(problem(f"{len(fields)} fields, over the {DRAFT_FIELDS_MAX} a form has", field="fields"))
    for name, value in list(fields.items())[:DRAFT_FIELDS_MAX]:
        if not DRAFT_NAMES.fullmatch(name):
            problems.append(problem(f"{_shown(name)} is not a field of the verdict form", field="fields"))
        elif not isinstance(value, str):
            problems.append(problem(f"a draft field is text, not {type_name(value)}", field=name))
        elif len(value) > (RATIONALE_MAX if name == "rationale" else DRAFT_VALUE_MAX):
            top = RATIONALE_MAX if name == "rationale" else DRAFT_VALUE_MAX
            problems.append(problem(f"over {top:,} characters", field=name))
    if problems:
        messages = "; ".join(p["message"] for p in problems[:MESSAGES_SHOWN])
        raise ArbiterError(f"The draft was not kept: {messages}.", details=problems[:DETAILS_MAX])
    return dict(fields)
