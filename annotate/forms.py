from django import forms

from annotate.models import Campaign


class ImportUploadForm(forms.Form):
    file = forms.FileField(help_text="JSONL: one trajectory per line, canonical v1 or OpenAI chat.")
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"),
        required=False,
        help_text="Optional: build comparisons from these trajectories in this campaign.",
    )
