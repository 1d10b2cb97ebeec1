"""Rules on the code itself (scripts/code_rules.py, also run by `make lint`), and the core
package's independence, checked in the suite."""

from __future__ import annotations

from pathlib import Path

from scripts.code_rules import (
    bare_isdigit,
    broken_rules,
    collectives,
    drf_integer_fields,
    long_functions,
    positional_content_types,
)

ROOT = Path(__file__).resolve().parent.parent


def test_the_rules_find_what_they_are_about():
    assert bare_isdigit("x = int(s) if s.isdigit() else 0") == [1]
    assert bare_isdigit("ok = s.isascii() and s.isdigit()") == []
    assert "²".isdigit() and not "²".isascii()  # why the rule exists
    assert drf_integer_fields("    n = serializers.IntegerField(min_value=1)") == [1]
    assert drf_integer_fields("    n = WholeNumberField(min_value=1)") == []
    assert collectives("        dist.all_reduce(tensor)") == [1]
    assert collectives("model = DistributedDataParallel(model)") == [1]
    assert collectives("        ranks.sum_gradients(parameters)") == []
    body = "\n".join(f"    x{n} = {n}" for n in range(99))
    assert long_functions(f"def short():\n{body}\n") == []  # 100 lines
    assert long_functions(f"def long():\n{body}\n    x = 0\n") == [1]  # 101 lines


def test_the_content_type_rule_finds_a_status_by_position_and_its_known_escapes():
    """render(request, template, context, 403) answered 200 with `Content-Type: 403` (issue 53)."""
    assert positional_content_types('return render(request, "x.html", {"m": 1}, 403)') == [1]
    assert positional_content_types('return render(\n    request,\n    "x.html",\n    {},\n    "text/html",\n)') == [1]
    assert positional_content_types('r = TemplateResponse(request, "x.html", {}, 403)') == [1]
    assert positional_content_types('r = HttpResponse("refused", 403)') == [1]
    assert positional_content_types('r = SimpleTemplateResponse("x.html", {}, 403)') == [1]
    assert positional_content_types('return render(request, "x.html", {"m": 1}, status=403)') == []
    assert positional_content_types('r = HttpResponse("refused", status=403)') == []
    assert positional_content_types("html = super().render(name, value, attrs, renderer)") == []  # a widget's
    assert positional_content_types("html = template.render(context, request)") == []


def test_no_code_breaks_a_rule():
    assert broken_rules() == {}


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
        "import sys, pkgutil, importlib, core; "
        "[importlib.import_module(f'core.{m.name}') for m in pkgutil.iter_modules(core.__path__)]; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'webapp', 'annotate', 'training', 'rewardmodel')); print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
