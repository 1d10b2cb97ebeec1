"""The launch form of a run kind, built from its config dataclass (fields, defaults, help)."""
from __future__ import annotations

import uuid

from django import forms

from webapp.runs.kinds import RunKind, simple_fields

_FIELDS = {int: forms.IntegerField, float: forms.FloatField, str: forms.CharField}


class RunLaunchForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="Optional; shown in the runs list.")
    # A fresh key per rendered form: a double-clicked submit launches one run, not two.
    idempotency_key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, kind: RunKind, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.config_names = []
        self.fields["idempotency_key"].initial = uuid.uuid4().hex
        for name, kind_type, default, help_text in simple_fields(kind.config_class):
            label = name.replace("_", " ")
            if name in kind.choices:
                choices = kind.choices[name]()
                coerce = kind_type if kind_type in (int, float, str) else str
                # Left out of a post, a choice takes its default, as a field missing from an API config does.
                field = forms.TypedChoiceField(choices=choices, coerce=coerce, initial=default, label=label,
                                               help_text=help_text, required=False, empty_value=default)
            elif kind_type is bool:
                field = forms.BooleanField(required=False, initial=default, label=label, help_text=help_text)
            else:
                # A number left empty takes its default, as a field missing from an API config does.
                field = _FIELDS[kind_type](initial=default, label=label, help_text=help_text,
                                           required=kind_type is not str and default is None)
            self.fields[name] = field
            self.config_names.append(name)

    def config(self) -> dict:
        return {name: self.cleaned_data[name] for name in self.config_names
                if self.cleaned_data.get(name) is not None}
