"""The one problem shape (core.problems) that forms, the API and imports report."""

from __future__ import annotations

from core.problems import form_field, problem, problem_of, problems_text


def test_a_problem_keeps_only_what_it_has():
    assert problem("too long", field="name") == {"message": "too long", "field": "name"}
    assert problem("bad JSON", line=3) == {"message": "bad JSON", "line": 3}


def test_older_shapes_read_alike():
    assert problem_of({"line": 4, "error": "not JSON", "unit": "record"}) == {"message": "not JSON", "line": 4}
    assert problem_of({"problem": "steps: too many"}) == {"message": "steps: too many"}
    assert problem_of("plain") == {"message": "plain"}


def test_a_form_puts_a_nested_problem_under_its_field():
    assert form_field({"field": "pool[2]", "message": "x"}) == "pool"
    assert form_field({"field": "dimensions.0.name", "message": "x"}) == "dimensions"
    assert form_field({"message": "x"}) == "__all__"


def test_problems_in_one_sentence():
    items = [problem("a", field="f"), problem("b", line=2), problem("c"), problem("d")]
    assert problems_text(items) == "f: a; line 2: b; c (and 1 more)"


def test_the_api_lists_a_services_problems_in_the_one_shape(rf):
    from webapp.api_errors import exception_handler
    from webapp.errors import ArbiterError

    response = exception_handler(ArbiterError("Not stored.", details=[problem("no", field="x"), "plain"]), {})
    assert response.status_code == 400
    assert response.data["errors"] == [{"message": "no", "field": "x"}, {"message": "plain"}]
