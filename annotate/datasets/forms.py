from django import forms

from annotate.models import Campaign, Judge
from core.ids import INT32_MAX
from webapp.form_input import WholeNumberFormField


class SnapshotForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="Shown in the list and in the downloads' file names.")
    description = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional; goes into the dataset card (README.md) of the downloads.",
    )
    # Ticked in a list with a filter box (static/js/site.js), not a Ctrl-click multi-select.
    campaigns = forms.ModelMultipleChoiceField(
        queryset=Campaign.objects.order_by("name"),
        widget=forms.CheckboxSelectMultiple,
        help_text="Judgements of these campaigns go into the snapshot.",
    )
    min_votes = WholeNumberFormField(
        min_value=1, max_value=1000, initial=1, help_text="Comparisons with fewer votes are left out."
    )
    min_agreement = forms.FloatField(
        min_value=0, max_value=1, initial=0.0, help_text="Share of votes on the winning side, 0-1."
    )
    include_synthetic = forms.BooleanField(
        required=False, help_text="Judgements by simulated annotators (`labelled_by` simulated in the files)."
    )
    feedback = forms.ChoiceField(
        choices=[
            ("human", "Annotators' votes only (people's; simulated annotators' too when included above)"),
            ("ai", "Judges' votes only (AI feedback)"),
            ("both", "Both, kept apart (annotators' where they voted, judges' elsewhere)"),
        ],
        initial="human",
        required=False,  # left out: annotators' votes only
        help_text="The files' `source` column says human or ai; `labelled_by` says who: people, simulated, "
        "mixed or judge.",
    )
    judges = forms.ModelMultipleChoiceField(
        queryset=Judge.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Whose AI feedback (none ticked: every judge's).",
    )
    date_from = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        help_text="Only judgements made on or after this day (empty: from the first).",
    )
    date_to = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        help_text="Only judgements made on or before this day (empty: up to now).",
    )
    aggregation = forms.ChoiceField(
        choices=[("majority", "Majority"), ("mean", "Mean of the 5-point scale")],
        help_text="How a comparison's votes become one preference and its margin.",
    )
    ties = forms.ChoiceField(
        choices=[("keep", "Keep as margin 0"), ("drop", "Drop")],
        help_text="What to do with comparisons whose votes end in a tie.",
    )
    seed = WholeNumberFormField(
        min_value=0,
        max_value=INT32_MAX,
        initial=0,
        help_text="Seed of the train/test split by task: the same seed, the same split.",
    )
    test_fraction = forms.FloatField(
        min_value=0, max_value=0.95, initial=0.2, help_text="Share of tasks held out for testing, 0-0.95."
    )
