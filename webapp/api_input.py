"""What every API route accepts: strict JSON bodies and integers within their columns' range.

`StrictJSONParser` is the API's JSON parser (settings.REST_FRAMEWORK): a body that
`core.json_input` refuses (too deep, NaN, 1e400, lone surrogates, NUL) is a 400 with
the reason. The integer helpers give every integer input the range of the column or
counter it ends up in, so 2**31 or 2**63 is refused at the edge instead of failing (or
wrapping round) in the database.
"""

from __future__ import annotations

import re

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core import json_input

INT32_MAX = 2**31 - 1  # PostgreSQL integer (PositiveIntegerField, IntegerField)
INT16_MAX = 2**15 - 1  # PostgreSQL smallint (PositiveSmallIntegerField)
ID_MAX = 2**63 - 1  # PostgreSQL bigint (every primary key)


_ASCII_ID = re.compile(r"[0-9]{1,19}")


def parse_id(raw) -> int | None:
    """A row id written as text ("12"): ASCII digits within 1..ID_MAX, else None. (`str.isdigit`
    is true for "²" and "٣", which `int` then refuses: every id read from text comes here.)"""
    value = parse_index(raw, limit=ID_MAX)
    return value if value else None


def parse_index(raw, *, limit: int = INT32_MAX) -> int | None:
    """A position written as text ("0", "12"): ASCII digits within 0..limit, else None (the
    same rule as `parse_id`, for indexes that start at 0)."""
    if not isinstance(raw, str) or not _ASCII_ID.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= limit else None


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw.strip():
            return {}
        try:
            return json_input.loads(raw)
        except json_input.JsonInputError as exc:
            raise ParseError(f"The request body is not valid: {exc}.") from None


def IdField(**kwargs) -> serializers.IntegerField:
    """A row id: 1 to 2**63 - 1."""
    return serializers.IntegerField(min_value=1, max_value=ID_MAX, **kwargs)


def Int32Field(*, min_value: int = 0, max_value: int = INT32_MAX, **kwargs) -> serializers.IntegerField:
    """A whole number that fits a 32-bit integer column (non-negative unless told)."""
    return serializers.IntegerField(min_value=min_value, max_value=max_value, **kwargs)


def query_id(request, name: str, *, required: bool = False) -> int | None:
    """An id from the query string (`?campaign=12`), checked; a bad one is a 400 naming it."""
    field = IdField(required=required, allow_null=not required)
    raw = request.query_params.get(name)
    if raw in (None, ""):
        if required:
            raise serializers.ValidationError({name: [f"Give the {name} id: ?{name}=ID."]})
        return None
    try:
        return field.run_validation(raw)
    except serializers.ValidationError as exc:
        raise serializers.ValidationError({name: exc.detail}) from None


def id_parameter(name: str, *, description: str = "", required: bool = False):
    """The OpenAPI query parameter read by `query_id`, with its range."""
    from drf_spectacular.utils import OpenApiParameter

    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": 1, "maximum": ID_MAX},
        description=description or f"The {name} id.",
        required=required,
    )
