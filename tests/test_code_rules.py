"""Rules on the code itself (scripts/code_rules.py, also run by `make lint`), and the core
package's independence, checked in the suite."""

from __future__ import annotations

from pathlib import Path

from scripts.code_rules import (
    broken_rules,
    collectives,
    digit_checks,
    integer_fields,
    lineage_dicts,
    long_functions,
    policy_saves,
    positional_content_types,
    private_imports,
    problem_dicts,
    request_ints,
    silenced_checkers,
    unexplained_ignores,
    utility_formulas,
)

ROOT = Path(__file__).resolve().parent.parent


def test_the_rules_find_what_they_are_about():
    assert digit_checks("x = int(s) if s.isdigit() else 0") == [1]
    assert "²".isdigit() and not "²".isascii()  # why the rule exists
    assert integer_fields("n = serializers.IntegerField(min_value=1)") == [1]
    assert integer_fields("n = WholeNumberField(min_value=1)") == []
    assert collectives("dist.all_reduce(tensor)") == [1]
    assert collectives("model = DistributedDataParallel(model)") == [1]
    assert collectives("ranks.sum_gradients(parameters)") == []
    body = "\n".join(f"    x{n} = {n}" for n in range(99))
    assert long_functions(f"def short():\n{body}\n") == []  # 100 lines
    assert long_functions(f"def long():\n{body}\n    x = 0\n") == [1]  # 101 lines


def test_the_rules_catch_the_escapes_a_line_regex_let_through():
    """The six escapes of issue 57's review, each once past the old line-by-line rules."""
    assert digit_checks("ok = s.isdecimal()") == [1]
    assert digit_checks("ok = str.isdigit(s)") == [1]
    assert digit_checks("ok = other.isascii() and s.isdigit()") == [1]  # isascii() on another variable
    assert digit_checks("ok = s.isascii() and s.isdigit()") == [1]  # the hand-written pair: core.ids.ascii_digits
    assert digit_checks("ok = ascii_digits(s)") == []
    assert request_ints("page = int(request.GET['page'])") == [1]
    assert request_ints("n = int(self.request.query_params.get('n', 0))") == [1]
    assert request_ints("n = int(settings.LIMIT)") == []
    assert integer_fields("from rest_framework.serializers import IntegerField") == [1]
    assert integer_fields("from rest_framework.fields import IntegerField as Whole") == [1]
    assert integer_fields("n = forms.IntegerField(min_value=1)") == [1]
    assert integer_fields("n = models.IntegerField(default=0)") == []  # a column, not a reader
    assert collectives("dist.reduce(tensor, dst=0)") == [1]
    assert collectives("dist.all_to_all(outputs, inputs)") == [1]
    assert collectives("import torch.distributed as d\nd.broadcast(t, 0)") == [2]
    assert collectives("from torch.distributed import all_to_all") == [1]
    assert collectives("from torch import distributed as td\ntd.barrier()") == [2]
    assert collectives("functools.reduce(add, xs)") == []  # not torch's


def test_a_problem_is_built_by_its_one_function():
    assert problem_dicts('details=[{"field": "pool", "message": "must be a list."}]') == [1]
    assert problem_dicts('p = {"message": "bad", "line": 3}') == [1]
    assert problem_dicts('details=[problem("must be a list.", field="pool")]') == []
    assert (
        problem_dicts('schema = {"field": {"type": "string"}, "message": {"type": "string"}, "line": 1, "x": 2}') == []
    )


def test_a_lineage_link_is_made_by_its_one_function():
    link = '{"direction": "input", "type": "policy", "id": p.pk, "label": str(p), "url": url}'
    assert lineage_dicts(f"links = [{link}]") == [1]
    assert lineage_dicts('links = [{"type": "run", "id": 3, "label": "x", "url": u}]') == [1]
    assert lineage_dicts('links = [lineage_link("policy", p.pk, p, url)]') == []


def test_the_rubrics_utility_is_written_once():
    assert utility_formulas("u = 10.0 * correct - 1.0 * episode.calls - 5.0 * episode.tool_errors") == [1]
    assert utility_formulas('u = w.step * steps + w.tool_error * outcome["tool_errors"]') == [1]
    assert utility_formulas('u = w.tool_error * outcome.get("tool_errors", 0) + w.loop * outcome.get("loop")') == [1]
    assert utility_formulas("shaping = 0.5 * invalid + config.tool_error_penalty * record.tool_errors") == []
    assert utility_formulas("u = episode_utility(correct, episode)") == []
    assert utility_formulas("rate = episode.tool_errors / episode.calls") == []


def test_a_policy_is_saved_by_its_one_function():
    assert policy_saves("model.save_pretrained(path)\ntokenizer.save_pretrained(path)") == [1, 2]
    assert policy_saves("merged(trainer.model).save_pretrained(out / 'model')") == [1]
    assert policy_saves("write_checkpoint(path, model, tokenizer, policy_dir=start)") == []


def test_another_packages_private_module_is_not_imported():
    assert private_imports("from httpx2._utils import get_environment_proxies") == [1]
    assert private_imports("import transformers.models._private as p") == [1]
    assert private_imports("from httpx2 import Client") == []
    assert private_imports("from benchmarks._common import ROOT") == []  # ours
    assert private_imports("from __future__ import annotations") == []


def test_an_import_contracts_exception_says_why():
    explained = (
        'ignore_imports = [\n    # the URLs wire every app\n    "arbiter.urls -> **",\n    "arbiter.api_urls -> **",\n]'
    )
    assert unexplained_ignores(explained) == []
    assert unexplained_ignores('ignore_imports = [\n    "arbiter.urls -> **",\n]') == [2]
    assert unexplained_ignores('ignore_imports = [\n    "a -> b",  # why\n    "c -> d",\n]') == [3]


def test_a_silenced_checker_is_found_unless_it_says_why():
    assert silenced_checkers("x = (1,\n  2)  # fmt: skip") == [2]
    assert silenced_checkers("# fmt: off\nx = 1\n# fmt: on") == [1]
    assert silenced_checkers("import a  # noqa: E402") == [1]
    assert silenced_checkers("import a  # noqa") == [1]
    assert silenced_checkers("except Exception:  # noqa: BLE001 - a user's environment may fail in any way") == []
    assert silenced_checkers("import w  # noqa: E402,F401  (each worker beats a row)") == []
    assert silenced_checkers('text = "# noqa: E402 is a string, not a comment"') == []
    assert silenced_checkers("episode._page = doc  # type: ignore[attr-defined]") == [1]
    assert silenced_checkers("x = f()  # type: ignore") == [1]
    assert silenced_checkers("x = f()  # type: ignore[no-any-return] - the stub is wrong") == []


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
