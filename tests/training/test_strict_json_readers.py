"""The policy's tool-call parsers and the judge client read JSON through the one strict reader
(core.json_input), as every import and API body does (issue 46): `1e400` was `inf` in both, and
`serve_policy` returned `"arguments": "{\\"x\\": Infinity}"`, which strict clients refuse; a lone
surrogate went through the parser too."""

from __future__ import annotations

import pytest

from training.envs.base import Tool
from training.judges.chat import _json_content
from training.policy.parsers import HermesParser, Llama3JsonParser

TOOL = Tool("calculate", "Work it out.", {"type": "object", "properties": {"x": {"type": "number"}}})
BAD = ['{"x": 1e400}', '{"x": NaN}', '{"x": -Infinity}', '{"x": "\\ud800"}', '{"x": "a\\u0000b"}']


@pytest.mark.parametrize("arguments", BAD)
def test_a_policys_call_with_json_a_client_cannot_read_is_a_problem_not_a_call(arguments):
    turn = HermesParser([TOOL]).parse(f'<tool_call>{{"name": "calculate", "arguments": {arguments}}}</tool_call>')
    assert not turn.calls and turn.problem
    turn = Llama3JsonParser([TOOL]).parse(f'{{"name": "calculate", "parameters": {arguments}}}')
    assert not turn.calls and turn.problem


def test_a_well_formed_call_still_parses():
    turn = HermesParser([TOOL]).parse('<tool_call>{"name": "calculate", "arguments": {"x": 1.5e300}}</tool_call>')
    assert turn.calls[0].arguments == {"x": 1.5e300} and not turn.problem


@pytest.mark.parametrize("content", BAD)
def test_a_judges_verdict_with_such_json_is_refused(content):
    value, problem = _json_content(content)
    assert value is None and problem.startswith("the content is not JSON")
