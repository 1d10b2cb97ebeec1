"""Input of the before/after pages: building a human evaluation, and the side-by-side view's filters."""

from __future__ import annotations

from django import forms

from training.models import Evaluation, EvaluationEntry, EvaluationEpisode
from webapp.form_input import WholeNumberFormField


class _SystemChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: EvaluationEntry) -> str:
        return obj.label


def _candidates(evaluation: Evaluation):
    return evaluation.entries.filter(is_baseline=False).order_by("position", "id")


class HumanEvaluationForm(forms.Form):
    candidate = _SystemChoice(
        queryset=EvaluationEntry.objects.none(),
        empty_label=None,
        error_messages={"invalid_choice": "Choose a system of this evaluation other than its baseline."},
        help_text="The system people judge.",
    )
    against = _SystemChoice(
        queryset=EvaluationEntry.objects.none(),
        required=False,
        empty_label="the start",
        error_messages={"invalid_choice": "No such system in this evaluation."},
        help_text="What it is judged against: the start, or another system (DPO against the RL policy, say).",
    )
    mode = forms.ChoiceField(
        choices=EvaluationEpisode.Mode.choices,
        initial=EvaluationEpisode.Mode.SAMPLED,
        help_text="Which episodes to compare (sample 0 of each task).",
    )
    votes_per_comparison = WholeNumberFormField(min_value=1, max_value=20, initial=3)

    def __init__(self, evaluation: Evaluation, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["candidate"].queryset = _candidates(evaluation)
        self.fields["against"].queryset = _candidates(evaluation)

    def clean(self):
        data = super().clean()
        if data.get("candidate") and data.get("against") == data["candidate"]:
            self.add_error("against", "Choose a system other than the candidate.")
        return data


class CompareForm(forms.Form):
    """The side-by-side view's query string; every field may be left out."""

    candidate = _SystemChoice(
        queryset=EvaluationEntry.objects.none(),
        required=False,
        error_messages={"invalid_choice": "No such system in this evaluation."},
    )
    mode = forms.ChoiceField(choices=EvaluationEpisode.Mode.choices, required=False)
    differ = forms.TypedChoiceField(
        choices=[("0", "all tasks"), ("1", "where the outcome differs")],
        coerce=lambda value: value == "1",
        empty_value=False,
        required=False,
        label="Tasks",
    )

    def __init__(self, evaluation: Evaluation, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["candidate"].queryset = _candidates(evaluation)
