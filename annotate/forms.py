from django import forms

from annotate.models import Campaign, ImportBatch
from webapp.api_input import INT32_MAX


class ImportUploadForm(forms.Form):
    file = forms.FileField(
        help_text="JSONL: a trajectory per line (canonical v1, OpenAI chat, Anthropic Messages) or a trace "
                  "export (OpenTelemetry GenAI, OpenInference, LangSmith, Langfuse).")
    format = forms.ChoiceField(
        choices=ImportBatch.Format.choices, required=False, initial=ImportBatch.Format.AUTO,
        help_text="Detect reads the format from the content; name it when detection refuses the file.",
    )
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"),
        required=False,
        help_text="Optional: build comparisons from these trajectories in this campaign.",
    )
    partial_traces = forms.BooleanField(
        required=False, label="Partial traces",
        help_text="Import traces whose records name a parent that is not in the file, marked partial "
                  "(without it such a file is refused, naming the trace).")

    def clean_format(self) -> str:
        return self.cleaned_data.get("format") or ImportBatch.Format.AUTO


class JudgementForm(forms.Form):
    """A verdict in screen terms; rating fields are added per campaign dimension."""

    choice = forms.IntegerField(min_value=1, max_value=5, error_messages={
        "required": "Pick a point on the scale (keys 1-5).",
        "min_value": "The scale runs from 1 to 5.", "max_value": "The scale runs from 1 to 5.",
    })
    both_bad = forms.BooleanField(required=False)
    first_wrong_left = forms.IntegerField(required=False, min_value=0, max_value=INT32_MAX)
    first_wrong_right = forms.IntegerField(required=False, min_value=0, max_value=INT32_MAX)
    rationale = forms.CharField(required=False, max_length=20_000, strip=True)

    def __init__(self, *args, dimensions: list[dict] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.dimensions = [d["name"] for d in dimensions]
        for d in dimensions:
            for side in ("left", "right"):
                self.fields[f"rating__{d['name']}__{side}"] = forms.IntegerField(
                    required=False, min_value=1, max_value=d["scale"])

    def ratings(self) -> dict:
        out = {}
        for dim in self.dimensions:
            sides = {side: self.cleaned_data.get(f"rating__{dim}__{side}") for side in ("left", "right")}
            sides = {k: v for k, v in sides.items() if v is not None}
            if sides:
                out[dim] = sides
        return out


class SkipForm(forms.Form):
    reason = forms.CharField(max_length=500, strip=True, error_messages={"required": "Say why you skip."})


class AdjudicateForm(forms.Form):
    """No default: the adjudicator picks a point on the scale."""

    choice = forms.IntegerField(min_value=1, max_value=5, error_messages={
        "required": "Pick the adjudicated label (A much better … B much better): nothing was recorded.",
        "invalid": "Pick the adjudicated label from the list.",
        "min_value": "The scale runs from 1 to 5.", "max_value": "The scale runs from 1 to 5.",
    })
    note = forms.CharField(required=False, max_length=5000)
