"""Every `curl` example in the docs runs, as written, against a live server (issue 46: the judges'
and corrections' examples sent `Bearer` and got 401 for months).

Each shell block of docs/*.md and README.md is read; its variable lines (`H="Authorization:
Token $ADMIN_KEY"; A=...`) and its curl commands (continued over lines, quotes and all) run in
order with bash and the real curl, `http://127.0.0.1:8000` and `$ARBITER` pointing at the live
server and every key variable ($TOKEN, $KEY, $ADMIN_KEY) at an admin's token with every role.
Every answer is checked: never 401 or 403 (the auth scheme and the roles the docs name), never
405 or an unknown route (a 404 must be about a row), never a body the API cannot parse, never
5xx; and where the doc says the status (`# 201 ...`, `# revoke: 204`, on the command's line or
the comment lines under it), it is one of those. The ids the examples name (users/7, tokens/12,
campaign=1, assignments/17, ...) exist in the world the test builds, as they would on a
deployment the reader has used.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS
from tests_env import SUFFIX

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(\w*)\s*$")
ASSIGNMENT = re.compile(r"^[A-Z_]+=")
STATUS = re.compile(r"\b([1-5]\d\d)\b")
LOCAL = "http://127.0.0.1:8000"
KEYS = ("TOKEN=", "KEY=", "ADMIN_KEY=")  # what the reader makes first (a token); the test gives its own


@dataclass
class Example:
    where: str  # file:line
    command: str
    setup: list[str]
    statuses: set[int] = field(default_factory=set)


def _code_and_comment(line: str) -> tuple[str, str]:
    """A shell line split at its first `#` outside quotes (a comment starts after whitespace)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :]
    return line.rstrip(), ""


def _open_quote(text: str) -> bool:
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
    return bool(quote)


def _statuses(comment: str) -> set[int]:
    return {int(s) for s in STATUS.findall(comment.split("{")[0])}


def examples_of(path: Path) -> list[Example]:
    found, lines, block, setup = [], path.read_text(encoding="utf-8").splitlines(), None, []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            block = None if block is not None else fence.group(1)
            i += 1
            continue
        if block not in ("sh", "bash", "shell"):
            i += 1
            continue
        code, comment = _code_and_comment(lines[i])
        if ASSIGNMENT.match(code) and not code.startswith(KEYS):
            setup.append(code)  # the file's variables, for its later blocks too (not the key: the test's)
        if not code.lstrip().startswith("curl "):
            i += 1
            continue
        start, parts = i, [code]
        while parts[-1].endswith("\\") or _open_quote("\n".join(parts)):
            i += 1
            code, comment = _code_and_comment(lines[i]) if not _open_quote("\n".join(parts)) else (lines[i], "")
            parts.append(code)
        statuses = _statuses(comment)
        while i + 1 < len(lines) and lines[i + 1].lstrip().startswith("#"):
            i += 1
            statuses |= _statuses(lines[i].lstrip()[1:])
        found.append(Example(f"{path.name}:{start + 1}", "\n".join(parts), list(setup), statuses))
        i += 1
    return found


def test_the_reader_finds_multi_line_commands_and_their_statuses(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "```sh\nA=http://x\ncurl -H 'a # b' $A/y   # revoke: 204\n"
        "curl -d '{\n  \"a\": 1}' \\\n  $A/z\n# 201 (done) or 202 (queued)\n```\n```python\ncurl no\n```\n"
    )
    first, second = examples_of(doc)
    assert (first.command, first.statuses, first.setup) == ("curl -H 'a # b' $A/y", {204}, ["A=http://x"])
    assert second.statuses == {201, 202} and second.command == "curl -d '{\n  \"a\": 1}' \\\n  $A/z"


EXAMPLES = [e for path in DOCS for e in examples_of(path)]


def test_the_docs_have_curl_examples():
    assert len(EXAMPLES) >= 30


@pytest.fixture
def world(tmp_path):
    """The rows the examples name, with the ids they name (the test resets the id sequences): an
    admin with every role is user 1 (its tokens 1 and 7), an annotator is user 7 (its token 12),
    the campaign is 1, and assignments 17 and 18 are the admin's leases (in campaigns 1 and 2); the
    first judgement the examples make is 31."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotate.models import Assignment, Comparison, Judgement
    from annotate.services.assignments import assignment_next
    from tests.factories import TaskFactory, TrajectoryFactory, UserFactory
    from tests.helpers import CANONICAL, call, make_campaign, seen, thought
    from webapp.models import ApiToken
    from webapp.tokens import api_token_create

    admin = UserFactory(id=1, username="docs-admin", roles=["admin", "researcher", "annotator"])
    _, key = api_token_create(user=admin, name="docs")  # token 1
    other = UserFactory(id=7, username="docs-user", roles=["annotator"])
    token, _ = api_token_create(user=other, name="a script")
    ApiToken.objects.filter(pk=token.pk).update(id=12)
    mine, _ = api_token_create(user=admin, name="to revoke")
    ApiToken.objects.filter(pk=mine.pk).update(id=7)
    correctness = {"name": "correctness", "scale": 5, "description": "Is the answer right?", "required": False}
    campaign = make_campaign(n_comparisons=0, k=2, dimensions=[correctness])
    assert campaign.pk == 1
    steps = [call("search", query="q"), seen("search", "r"), call("open", n=0), seen("open", "page"), thought("so")]
    for _ in range(4):
        task = TaskFactory()
        a, b = TrajectoryFactory(task=task, steps=steps), TrajectoryFactory(task=task, steps=steps[:4])
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    lease = assignment_next(campaign=campaign, annotator=admin)
    Assignment.objects.filter(pk=lease.pk).update(id=17, left_is_a=True)
    second = assignment_next(campaign=make_campaign(n_comparisons=1, k=1), annotator=admin)  # campaign 2
    Assignment.objects.filter(pk=second.pk).update(id=18)
    with connection.cursor() as cursor:  # rows the examples create come after these
        for model in (get_user_model(), ApiToken, Assignment):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{model._meta.db_table}', 'id'), 1000)")
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Judgement._meta.db_table}', 'id'), 30)")
    (tmp_path / "one_or_a_list.json").write_text(json.dumps(CANONICAL))
    (tmp_path / "big.jsonl").write_text(json.dumps({**CANONICAL, "answer": "another"}) + "\n")
    return {"key": key, "cwd": tmp_path}


IDS = {"ID": "17", "CID": "1"}  # an assignment of the admin's, a correction


def _run(example: Example, url: str, world) -> tuple[int, str]:
    script = "\n".join([*example.setup, example.command]).replace(LOCAL, url)
    env = {"PATH": os.environ["PATH"], "ARBITER": url, **IDS}
    env.update({name.removesuffix("="): world["key"] for name in KEYS})
    done = subprocess.run(
        ["bash", "-c", script + " -s -S --max-time 30 -w '\\n%{http_code}'"],
        cwd=world["cwd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    body, _, status = done.stdout.rpartition("\n")
    assert done.returncode == 0, f"{example.where}: curl exited {done.returncode}: {done.stderr[-500:]}"
    assert status.isascii() and status.isdigit() and status != "000", (example.where, done.stdout[-500:])
    return int(status), body


@pytest.mark.django_db(transaction=True, reset_sequences=True)
@pytest.mark.parametrize("path", [p for p in DOCS if examples_of(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_curl_example_of_a_doc_runs_and_answers_as_it_says(path, live_server, world):
    from django.urls import Resolver404, resolve

    seen = {}
    for example in examples_of(path):
        status, body = _run(example, live_server.url, world)
        seen[example.where] = status if status < 400 else f"{status} {body[:160]}"
        shown = f"{example.where}: {status} {body[:300]}"
        assert status not in (401, 403), f"the example's key or role is refused: {shown}"
        assert status != 405 and status < 500, shown
        assert "request body is not valid" not in body, f"the example's body does not parse: {shown}"
        if status == 404:
            command = example.command.replace("$A", "/api/v1")
            for name, value in IDS.items():
                command = command.replace(f"${name}", value)
            target = re.search(r"(/api/[^\s'\"?]*)", command)
            assert target, shown
            try:
                resolve(target.group(1))
            except Resolver404:
                pytest.fail(f"no such route: {shown}")
        if example.statuses:
            assert status in example.statuses, f"the doc says {sorted(example.statuses)}: {shown}"
    ARTIFACTS.mkdir(exist_ok=True)  # what each example answered, for the reader of a run
    (ARTIFACTS / f"docs-examples-{path.stem}{SUFFIX}.json").write_text(json.dumps(seen, indent=1))
