"""The columns of each export format, as Arrow schemas (Parquet's types, and `datasets`'
features for JSON Lines, which carry none). annotate/exports.py writes the rows; the dataset
card (annotate/export_card.py) lists the columns."""

from __future__ import annotations

import pyarrow as pa

FORMATS = ("trl", "trl_text", "kto", "raw", "steps", "sft", "dpo")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
FILETYPES = ("jsonl", "parquet")

_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
_MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
        ("is_error", pa.bool_()),
    ]
)
_MESSAGES = pa.list_(_MESSAGE)
RATINGS = pa.list_(pa.struct([("dimension", pa.string()), ("side", pa.string()), ("value", pa.int64())]))
_PAIR_META = [
    ("margin", pa.float64()),
    ("comparison_id", pa.int64()),
    ("task_id", pa.string()),
    ("votes", pa.int64()),
    ("preferred", pa.string()),
    ("split", pa.string()),
    ("source", pa.string()),  # human, or ai: judges' votes (AI feedback), where the snapshot includes them
    ("labelled_by", pa.string()),  # people, simulated, mixed or judge (annotate/export_labels.py)
    ("both_bad", pa.bool_()),  # every vote on the pair said both sides were bad
]
_LABELLED_BY = ("labelled_by", pa.string())

SCHEMAS = {
    "trl": pa.schema(
        [("prompt", _MESSAGES), ("chosen", _MESSAGES), ("rejected", _MESSAGES), ("tools", pa.string()), *_PAIR_META]
    ),
    "trl_text": pa.schema([("prompt", pa.string()), ("chosen", pa.string()), ("rejected", pa.string()), *_PAIR_META]),
    "kto": pa.schema(
        [
            ("prompt", _MESSAGES),
            ("completion", _MESSAGES),
            ("label", pa.bool_()),
            ("tools", pa.string()),
            ("judgement_id", pa.int64()),
            ("comparison_id", pa.int64()),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("annotator", pa.string()),
            ("side", pa.string()),
            ("choice", pa.int64()),
            ("both_bad", pa.bool_()),
            ("split", pa.string()),
            _LABELLED_BY,
        ]
    ),
    "raw": pa.schema(
        [
            ("judgement_id", pa.int64()),
            ("comparison_id", pa.int64()),
            ("task_id", pa.string()),
            ("annotator", pa.string()),
            ("shown_left", pa.string()),
            ("choice", pa.int64()),
            ("preferred", pa.string()),
            ("both_bad", pa.bool_()),
            ("ratings", RATINGS),
            ("first_wrong_step_a", pa.int64()),
            ("first_wrong_step_b", pa.int64()),
            ("rationale", pa.string()),
            ("seconds", pa.float64()),
            ("synthetic", pa.bool_()),
            ("created_at", pa.string()),
            ("split", pa.string()),
            _LABELLED_BY,
        ]
    ),
    "steps": pa.schema(
        [
            ("prompt", pa.string()),
            ("completions", pa.list_(pa.string())),
            ("labels", pa.list_(pa.bool_())),
            ("judgement_id", pa.int64()),
            ("comparison_id", pa.int64()),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("annotator", pa.string()),
            ("side", pa.string()),
            ("split", pa.string()),
            _LABELLED_BY,
        ]
    ),
    "sft": pa.schema(
        [
            ("messages", _MESSAGES),
            ("tools", pa.string()),
            ("correction_id", pa.int64()),
            ("original_id", pa.int64()),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("kind", pa.string()),
            ("replayed", pa.bool_()),
            ("split", pa.string()),
            _LABELLED_BY,
            ("origin", pa.string()),  # correction (an accepted correction) or chosen (a pair's chosen side)
        ]
    ),
    "dpo": pa.schema(
        [
            ("prompt", _MESSAGES),
            ("chosen", _MESSAGES),
            ("rejected", _MESSAGES),
            ("tools", pa.string()),
            ("source", pa.string()),  # correction, or human / ai: a comparison's aggregated votes
            ("correction_id", pa.int64()),
            ("comparison_id", pa.int64()),
            ("task_id", pa.string()),
            ("margin", pa.float64()),
            ("split", pa.string()),
            _LABELLED_BY,
            ("both_bad", pa.bool_()),  # a comparison's pair that every vote called both bad
        ]
    ),
}


def _feature(kind: pa.DataType):
    """An Arrow type as the `datasets` library writes its features (Value, List, a dict for a struct)."""
    if pa.types.is_list(kind):
        return {"feature": _feature(kind.value_type), "_type": "List"}
    if pa.types.is_struct(kind):
        return {kind.field(i).name: _feature(kind.field(i).type) for i in range(kind.num_fields)}
    names = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "bool"}
    return {"dtype": names[kind], "_type": "Value"}


def features_of(fmt: str) -> dict:
    """The columns of `fmt` as `datasets.Features.from_dict` takes them (features.json in a bundle):
    JSONL carries no types, and a column that is null in every row of one split would otherwise be
    typed null there and refuse to line up with the other split."""
    return {field.name: _feature(field.type) for field in SCHEMAS[fmt]}


def rating_rows(ratings) -> list[dict]:
    """A judgement's ratings ({dimension: {A|B: value}}) as rows, in dimension then side order."""
    if not isinstance(ratings, dict):
        return []
    return [
        {"dimension": dim, "side": side, "value": value}
        for dim, sides in sorted(ratings.items())
        if isinstance(sides, dict)
        for side, value in sorted(sides.items())
    ]
