from django import forms

from annotate.models import Campaign
from webapp.api_input import INT32_MAX


class SnapshotForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 2}))
    campaigns = forms.ModelMultipleChoiceField(queryset=Campaign.objects.order_by("name"))
    min_votes = forms.IntegerField(min_value=1, max_value=1000, initial=1)
    min_agreement = forms.FloatField(min_value=0, max_value=1, initial=0.0,
                                     help_text="Share of votes on the winning side, 0-1.")
    include_synthetic = forms.BooleanField(required=False, help_text="Judgements by simulated annotators.")
    date_from = forms.DateField(required=False, help_text="YYYY-MM-DD")
    date_to = forms.DateField(required=False, help_text="YYYY-MM-DD")
    aggregation = forms.ChoiceField(choices=[("majority", "Majority"), ("mean", "Mean of the 5-point scale")])
    ties = forms.ChoiceField(choices=[("keep", "Keep as margin 0"), ("drop", "Drop")])
    seed = forms.IntegerField(min_value=0, max_value=INT32_MAX, initial=0)
    test_fraction = forms.FloatField(min_value=0, max_value=0.95, initial=0.2)
