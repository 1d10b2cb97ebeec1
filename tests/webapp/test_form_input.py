"""HTML forms read whole numbers by the API's rule (core.ids): what the API refuses, a page refuses."""

import pytest

from annotate.forms import AdjudicateForm
from webapp.form_input import WholeNumberFormField


@pytest.mark.parametrize("raw", ["٣", "²", " 3", "3 ", "3.0", "+3", "1e3", "true", "3,000", "0x3"])
def test_what_django_would_read_as_a_number_is_refused(raw):
    field = WholeNumberFormField()
    with pytest.raises(Exception, match="whole number"):
        field.clean(raw)


@pytest.mark.parametrize(("raw", "value"), [("3", 3), ("-2", -2), ("0", 0), (7, 7)])
def test_ascii_digits_are_read(raw, value):
    assert WholeNumberFormField().clean(raw) == value


def test_the_bounds_and_the_required_rule_are_djangos():
    field = WholeNumberFormField(min_value=1, max_value=5)
    with pytest.raises(Exception, match="less than or equal to 5"):
        field.clean("6")
    with pytest.raises(Exception, match="required"):
        field.clean("")
    assert WholeNumberFormField(required=False).clean("") is None


@pytest.mark.parametrize("raw", ["٣", " 3", "3.0"])
def test_a_form_of_the_app_refuses_them_with_its_own_message(raw):
    form = AdjudicateForm(data={"choice": raw, "note": ""})
    assert not form.is_valid()
    assert form.errors["choice"] == ["Pick the adjudicated label from the list."]
    assert AdjudicateForm(data={"choice": "3", "note": ""}).is_valid()
