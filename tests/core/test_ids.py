"""One reader of ids and whole numbers (core.ids): every spelling that is not ASCII digits is
refused the same way by the query string, the serializer fields and the forms."""

from __future__ import annotations

import pytest

from core.ids import ID_MAX, id_value, integer_value, parse_id, parse_index

NOT_IDS = ["²", "٣", " 7", "7 ", "1.0", "+7", "0x1", "1e3", "", "-1", "0", "9" * 20, "\u0000", "½", "7\n"]


@pytest.mark.parametrize("raw", NOT_IDS)
def test_text_that_is_not_ascii_digits_in_range_is_no_id(raw):
    assert parse_id(raw) is None
    assert id_value(raw) is None


def test_ids_and_indexes():
    assert parse_id("12") == 12 and parse_id("012") == 12 and parse_id(str(ID_MAX)) == ID_MAX
    assert parse_id(str(ID_MAX + 1)) is None
    assert parse_index("0") == 0 and parse_index("-0") is None and parse_index("²") is None
    assert parse_index("2147483648") is None  # past a 32-bit column


@pytest.mark.parametrize("value", [True, False, 1.0, 7.5, None, [], {}, -3, 0, 2**63])
def test_json_values_that_are_not_ids(value):
    assert id_value(value) is None


def test_a_json_integer_is_an_id():
    assert id_value(7) == 7 and id_value("7") == 7


def test_whole_numbers_take_a_sign_only_as_ascii():
    assert integer_value("-5", low=-10, high=10) == -5
    assert integer_value("−5", low=-10, high=10) is None  # U+2212, not "-"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", ["²", "٣", " 7", "1.0", True, 1.0])
def test_the_api_field_and_the_query_reader_refuse_the_same(raw, rf):
    """DRF's IntegerField takes "٣" as 3, " 7" and "1.0" as numbers, `true` as 1: the API's
    integer fields are `WholeNumberField`, which reads by `core.ids`."""
    from rest_framework import serializers
    from rest_framework.request import Request

    from webapp.api_input import IdField, Int32Field, query_id

    for field in (IdField(), Int32Field()):
        with pytest.raises(serializers.ValidationError):
            field.run_validation(raw)
    if isinstance(raw, str):
        with pytest.raises(serializers.ValidationError):
            query_id(Request(rf.get("/", {"campaign": raw})), "campaign")
