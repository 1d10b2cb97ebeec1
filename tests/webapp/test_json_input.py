"""core/json_input.py at the depth limit: the quick bracket count never lets a value that is
too deep through, whatever the brackets inside strings."""

import pytest

from core.json_input import MAX_DEPTH, JsonInputError, loads


@pytest.mark.parametrize("opening", ["[", '{"k":'])
def test_the_deepest_allowed_value_loads_and_one_level_more_is_refused(opening):
    closing = "]" if opening == "[" else "}"

    def nested(levels: int) -> str:
        inner = "[]" if opening == "[" else "{}"
        return opening * (levels - 1) + inner + closing * (levels - 1)

    assert loads(nested(MAX_DEPTH)) is not None
    with pytest.raises(JsonInputError, match="levels deep"):
        loads(nested(MAX_DEPTH + 1))
    with pytest.raises(JsonInputError, match="levels deep"):
        loads(nested(MAX_DEPTH + 1).encode())


def test_brackets_inside_strings_neither_refuse_nor_hide_depth():
    assert loads('["' + "[{" * 200 + '"]') == ["[{" * 200]
    deep = "[" * (MAX_DEPTH + 1) + '"x"' + "]" * (MAX_DEPTH + 1)
    with pytest.raises(JsonInputError, match="levels deep"):
        loads(deep)
    assert loads("[" * (MAX_DEPTH - 1) + '"' + "[" * 500 + '"' + "]" * (MAX_DEPTH - 1))
