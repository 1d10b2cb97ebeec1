"""A served reply held to a JSON Schema while it is generated (training/policy/json_schema_prefix.py):
every prefix of a valid object is taken; an object the schema refuses is refused, at the first
character that cannot lead to a valid one; and what it accepts whole, jsonschema accepts."""

import json
import random

import jsonschema
import pytest
import torch

from training.judges.prompt import VERDICTS, verdict_schema
from training.policy.batch_generation import Row, _pick
from training.policy.json_constraint import JsonConstraint
from training.policy.json_schema_prefix import SchemaPrefix

DIMENSIONS = [
    {"name": "correctness", "scale": 5, "description": "Is the final answer right?"},
    {"name": "efficiency", "scale": 3, "description": ""},
]
VERDICT = verdict_schema(DIMENSIONS)


def a_verdict(rng: random.Random) -> dict:
    return {
        "rationale": rng.choice(["", "A searched; B guessed.", 'He said "no" \\ é\n']),
        "verdict": rng.choice(VERDICTS),
        "both_bad": rng.choice([True, False]),
        "ratings": {
            "correctness": {"A": rng.randint(1, 5), "B": rng.randint(1, 5)},
            "efficiency": {"A": rng.randint(1, 3), "B": rng.randint(1, 3)},
        },
        "first_wrong_step_a": rng.choice([None, 0, 3, 12]),
        "first_wrong_step_b": rng.choice([None, 1]),
    }


def shuffled(value, rng: random.Random):
    """The same object with its keys in another order (any order is valid)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    return value


def texts(value) -> list[str]:
    return [json.dumps(value), json.dumps(value, indent=2), json.dumps(value, ensure_ascii=False)]


def accepted(schema: dict, text: str) -> bool:
    state = SchemaPrefix(schema).feed(text)
    return state is not None and state.complete


def test_every_prefix_of_a_valid_verdict_is_taken_in_any_key_order():
    rng = random.Random(0)
    for _ in range(30):
        value = shuffled(a_verdict(rng), rng)
        for text in texts(value):
            state = SchemaPrefix(VERDICT)
            for char in text:
                state = state.feed(char)
                assert state is not None, text
            assert state.complete, text


MUTATIONS = [
    lambda v: v.update(verdict="A is better") or v,  # not one of the words
    lambda v: v.update(both_bad="yes") or v,  # wrong type
    lambda v: v["ratings"]["correctness"].update(A=6) or v,  # above the maximum
    lambda v: v["ratings"]["correctness"].update(A=0) or v,  # below the minimum
    lambda v: v["ratings"]["efficiency"].update(B=2.5) or v,  # not an integer
    lambda v: v.update(first_wrong_step_a=-1) or v,  # below the minimum
    lambda v: v.update(extra=1) or v,  # a key not listed
    lambda v: v.pop("both_bad") and v,  # a required key missing
    lambda v: v["ratings"].pop("efficiency") and v,  # a nested required key missing
    lambda v: v.update(ratings=[1, 2]) or v,  # an array for an object
    lambda v: v.update(rationale=None) or v,  # null for a string
]


@pytest.mark.parametrize("mutate", range(len(MUTATIONS)))
def test_an_object_the_schema_refuses_is_refused(mutate):
    rng = random.Random(mutate)
    for _ in range(5):
        value = MUTATIONS[mutate](a_verdict(rng))
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, VERDICT)
        for text in texts(shuffled(value, rng)):
            assert not accepted(VERDICT, text), text


def test_accepted_whole_means_valid_on_random_objects():
    """Random JSON objects near a small schema: the prefix reader accepts one whole exactly when
    jsonschema says it is valid (every keyword here is one the reader holds while generating)."""
    schema = {
        "type": "object",
        "properties": {
            "label": {"enum": ["yes", "no", 3, None]},
            "score": {"type": "number", "exclusiveMinimum": -1, "maximum": 10},
            "count": {"type": ["integer", "null"], "minimum": -5, "maximum": 40},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b\\c"]}},
            "inner": {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]},
        },
        "required": ["label"],
        "additionalProperties": False,
    }
    pool = {
        "label": ["yes", "no", "maybe", 3, 4, None, True, "ye"],
        "score": [-1, -0.5, 0, 10, 10.5, 1e1, 2.5e-3, "1"],
        "count": [None, -6, -5, 0, 40, 41, 7.5, 100, "3"],
        "tags": [[], ["a"], ["a", "b\\c"], ["c"], [1], "a"],
        "inner": [{"ok": True}, {"ok": False}, {}, {"ok": True, "x": 1}, []],
        "other": [1],
    }
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for _ in range(1000):
        value = {k: rng.choice(v) for k, v in pool.items() if rng.random() < (0.9 if k == "label" else 0.3)}
        if rng.random() < 0.05:
            value["other"] = 1
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        seen[valid] += 1
        for text in texts(value):
            assert accepted(schema, text) == valid, (text, valid)
    assert min(seen.values()) > 100  # both kinds were tried
    # Stricter than jsonschema in one way: an integer is written without a fraction (7, not 7.0).
    assert not accepted(schema, '{"label": "no", "count": 7.0}')


def test_the_schemas_own_shape_is_refused_at_its_first_key():
    """What SmolLM2-135M-Instruct wrote back under a JSON-only constraint (benchmarks/RESULTS.md,
    issue 55): the schema's own keys. Held to the schema, the first wrong letter is refused."""
    state = SchemaPrefix(VERDICT).feed('{"')
    assert state is not None
    assert state.feed("t") is None and state.feed("r") is not None and state.feed("v") is not None
    assert SchemaPrefix(VERDICT).feed('{"verdict": "A much') is not None
    assert SchemaPrefix(VERDICT).feed('{"verdict": "A mucx') is None
    assert SchemaPrefix(VERDICT).feed('{"verdict": "') is not None
    assert SchemaPrefix(VERDICT).feed("{}") is None  # required keys first
    assert SchemaPrefix(VERDICT).feed('{"both_bad": 1') is None


def test_a_decoder_that_would_write_the_schema_back_writes_a_verdict():
    """The likeliest-allowed-token decoder (training/policy/batch_generation.py) over a vocabulary
    of pieces, with a model that prefers the schema's shape: held to the schema it ends with a
    reply jsonschema accepts."""
    pieces = ['{"', "type", '": "', "json", '", "', "properties", "verdict", "rationale", "both_bad", "ratings"]
    pieces += ["first_wrong_step_a", "first_wrong_step_b", "correctness", "efficiency", '":', ":", " ", '"', ",", "}"]
    pieces += ["A", "B", "true", "false", "null", "1", "2", "3", "{", "A better", "B much better", "ok"]
    pieces += ["<end>"]
    end = len(pieces) - 1
    base = torch.zeros(len(pieces))
    for rank, piece in enumerate(["json", "properties", "type"]):  # what the model would rather write
        base[pieces.index(piece)] = 10.0 + rank
    base[pieces.index('"')], base[pieces.index(" ")] = 5.0, -5.0
    constraint = JsonConstraint(lambda t: "" if t == end else pieces[t], [end], state=SchemaPrefix(VERDICT))
    row = Row(prompt=[0], limit=400, temperature=0.0, constraint=constraint)
    written, uses = [], torch.zeros(len(pieces))
    for _ in range(400):
        token = _pick((base - uses)[None, :], [row])[0]  # a frequency penalty, so strings end
        if token == end:
            break
        written.append(pieces[token])
        uses[token] += 1
    text = "".join(written)
    assert constraint.state.complete, text
    jsonschema.validate(json.loads(text), VERDICT)
