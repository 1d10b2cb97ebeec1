"""What every API route accepts: strict JSON bodies and integers within their columns' range.

`StrictJSONParser` is the API's JSON parser (settings.REST_FRAMEWORK): a body that
`core.json_input` refuses (too deep, NaN, 1e400, lone surrogates, NUL) is a 400 with
the reason. The integer fields read whole numbers by the one rule of `core.ids` and give every integer
input the range of the column or counter it ends up in, so 2**31 or 2**63 is refused at the
edge instead of failing (or wrapping round) in the database.
"""

from __future__ import annotations

import math

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core import json_input
from core.ids import ID_MAX, INT32_MAX, integer_value, parse_id


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw.strip():
            return {}
        try:
            return json_input.loads(raw)
        except json_input.JsonInputError as exc:
            raise ParseError(f"The request body is not valid: {exc}.") from None


class WholeNumberField(serializers.IntegerField):
    """DRF's IntegerField reading only what `core.ids` calls a whole number: a JSON integer or
    text of ASCII digits. DRF's own takes `true` as 1, "٣" as 3, " 7" and "1.0" as numbers; every
    integer field of the API is this one (a code rule bans `serializers.IntegerField`)."""

    def to_internal_value(self, data):
        value = integer_value(data, low=-math.inf, high=math.inf)
        if value is None:
            self.fail("invalid")
        return value


def IdField(**kwargs) -> WholeNumberField:
    """A row id: 1 to 2**63 - 1."""
    return WholeNumberField(min_value=1, max_value=ID_MAX, **kwargs)


def Int32Field(*, min_value: int = 0, max_value: int = INT32_MAX, **kwargs) -> WholeNumberField:
    """A whole number that fits a 32-bit integer column (non-negative unless told)."""
    return WholeNumberField(min_value=min_value, max_value=max_value, **kwargs)


def query_id(request, name: str, *, required: bool = False) -> int | None:
    """An id from the query string (`?campaign=12`), checked; a bad one is a 400 naming it."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        if required:
            raise serializers.ValidationError({name: [f"Give the {name} id: ?{name}=ID."]})
        return None
    value = parse_id(raw)
    if value is None:
        raise serializers.ValidationError({name: [f"Give a whole number from 1 to {ID_MAX} (ASCII digits)."]})
    return value


def id_parameter(name: str, *, description: str = "", required: bool = False):
    """The OpenAPI query parameter read by `query_id`, with its range."""
    from drf_spectacular.utils import OpenApiParameter

    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": 1, "maximum": ID_MAX},
        description=description or f"The {name} id.",
        required=required,
    )
