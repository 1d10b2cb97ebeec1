"""What every HTML form accepts as a whole number: the API's rule (`core.ids`), not Django's.

Django's `forms.IntegerField` reads "٣", " 3" and "3.0" as 3, which the API refuses; a page and
the API that do the same thing must agree on what a number is. Every integer field of a form is
`WholeNumberFormField` (a code rule, scripts/code_rules.py, refuses `forms.IntegerField`).
"""

from __future__ import annotations

import math

from django import forms
from django.core.exceptions import ValidationError

from core.ids import integer_value


class WholeNumberFormField(forms.IntegerField):
    """Text of ASCII digits (an optional "-"), as `core.ids.integer_value` reads it; min_value and
    max_value and the field's error messages as Django's."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        number = integer_value(value, low=-math.inf, high=math.inf)
        if number is None:
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return number
