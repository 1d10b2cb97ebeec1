"""Rules on the code itself, for bug classes that came back in new code after being fixed where
they were found (issues 45 and 46). Each names the shared function to use instead.

- `str.isdigit()` alone: true for "²", "٣" and "½"-like digits that `int()` then refuses (a 500
  on request data, a crashed episode on a policy's output). Pair it with `isascii()` on the same
  line, or read ids with `webapp.api_input.parse_id` / `parse_index`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_FOLDERS = ("core", "annotate", "webapp", "rewardmodel", "training", "benchmarks", "scripts")
BARE_ISDIGIT = re.compile(r"\.isdigit\(\)")


def python_files():
    for folder in APP_FOLDERS:
        yield from (ROOT / folder).rglob("*.py")


def bare_isdigit(source: str) -> list[int]:
    """Lines that call `.isdigit()` without `.isascii()` on the same line."""
    return [
        n for n, line in enumerate(source.splitlines(), 1) if BARE_ISDIGIT.search(line) and ".isascii()" not in line
    ]


def test_the_rule_finds_a_bare_isdigit_and_allows_the_ascii_pair():
    assert bare_isdigit("x = int(s) if s.isdigit() else 0") == [1]
    assert bare_isdigit("ok = s.isascii() and s.isdigit()") == []
    assert "²".isdigit() and not "²".isascii()  # why the rule exists


def test_no_code_reads_digits_with_a_bare_isdigit():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in python_files()
        if (lines := bare_isdigit(path.read_text(encoding="utf-8")))
    }
    assert not found, (
        f"str.isdigit() is true for '²' and '٣', which int() refuses: use s.isascii() and s.isdigit(), or "
        f"webapp.api_input.parse_id / parse_index for ids: {found}"
    )


def test_the_encyclopedia_answers_an_odd_digit_as_a_result_number_with_an_error():
    """Where the rule came from in an environment: a policy writing `open[²]` crashed the episode."""
    from training.envs.encyclopedia.browser import TextBrowser
    from training.envs.encyclopedia.corpus import generate_corpus

    browser = TextBrowser(generate_corpus(seed=0))
    episode = browser.reset("Who founded it?")
    browser.step(episode, "search[founded]")
    for odd in ("²", "٣", "½"):
        result = browser.step(episode, f"open[{odd}]")
        assert result.error and "no result" in result.observation


def test_the_core_package_imports_no_django_and_no_app():
    """`core` holds the contracts every app shares (issue 46): plain Python, so ML code that reads
    JSON through it runs without Django. Checked in a fresh interpreter: importing it loads
    neither Django nor any app (webapp's package boots Celery)."""
    import subprocess
    import sys

    probe = (
        "import sys, core, core.json_input; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'webapp', 'annotate', 'training', 'rewardmodel')); print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
