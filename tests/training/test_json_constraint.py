"""The JSON object a served reply is held to under `response_format` (training/policy/json_constraint.py):
every prefix of a JSON object is taken, anything that cannot continue one is refused, and the
decoder takes the likeliest token the constraint allows (training/policy/batch_generation.py)."""

import json

import pytest
import torch

from training.policy.batch_generation import Row, _pick
from training.policy.json_constraint import MAX_SPACES, JsonConstraint, JsonPrefix

OBJECTS = [
    {},
    {"a": []},
    {"verdict": "first", "scores": {"correctness": 4, "style": -1.5e3}, "ok": True, "none": None},
    {"nested": [[1, 2.0, {"x": [False]}], 'é \u2603 "quoted" \\ / \n']},
]


@pytest.mark.parametrize("value", OBJECTS)
def test_every_prefix_of_a_json_object_is_taken_and_the_whole_is_complete(value):
    for text in (json.dumps(value), json.dumps(value, indent=1), json.dumps(value, ensure_ascii=False)):
        state = JsonPrefix()
        for end in range(1, len(text) + 1):
            assert JsonPrefix().feed(text[:end]) is not None, text[:end]
        state = state.feed(text)
        assert state is not None and state.complete, text


@pytest.mark.parametrize(
    "text",
    [
        "[1]",  # the reply is an object
        '"x"',
        "{,",
        '{"a" 1',
        '{"a": 01',
        '{"a": 1.}',
        '{"a": -}',
        '{"a": tru}',
        '{"a": nulx',
        '{"a": 1,}',
        '{"a": [1,]',
        '{"a": "\\x"',
        '{"a": "\\u12g',
        '{"a": "line\nbreak"',  # a control character inside a string
        '{"a": 1]',
        "{}}",
        "{} x",
        '{"a": NaN',
        '{"a": Infinity',
        '{"a": \u0663}',  # an Arabic-Indic digit is not a JSON digit
        "{" + " " * (MAX_SPACES + 1),
    ],
)
def test_text_that_cannot_continue_a_json_object_is_refused(text):
    assert JsonPrefix().feed(text) is None


class Tokens:
    """A vocabulary of a few pieces: the constraint reads each token's text."""

    PIECES = ["<end>", "hello", "{", "}", '"a"', ":", " 1", "[", "]", ",", "\ufffd", "<|user|>"]

    def text(self, token: int) -> str:
        return self.PIECES[token]


def _constraint() -> JsonConstraint:
    return JsonConstraint(Tokens().text, [0], banned={11})


def test_the_likeliest_allowed_token_is_taken_and_the_turn_ends_once_the_object_is_closed():
    row = Row(prompt=[1], limit=10, temperature=0.0, constraint=_constraint())
    order = [1, 10, 11, 0, 4, 5, 6, 3, 2]  # the model prefers text, a broken byte, a special token
    picked = []
    for _ in range(6):
        logits = torch.zeros(1, len(Tokens.PIECES))
        for rank, token in enumerate(order):
            logits[0, token] = 100.0 - rank
        picked += _pick(logits, [row])
        if picked[-1] == 0:
            break
    assert "".join(Tokens.PIECES[t] for t in picked[:-1]) == '{"a":"a"}' and picked[-1] == 0


def test_a_sampled_row_draws_again_without_the_refused_tokens():
    row = Row(prompt=[1], limit=10, temperature=1.0, generator=torch.Generator().manual_seed(0))
    row.constraint = _constraint()
    logits = torch.full((1, len(Tokens.PIECES)), -30.0)
    logits[0, 1] = 10.0  # "hello": almost every draw, never allowed
    logits[0, 2] = 0.0
    assert _pick(logits, [row]) == [2] and row.constraint.state.expect == "key"
    assert not row.constraint.allows(0)  # the object is open: no end of turn yet
