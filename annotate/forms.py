from dataclasses import asdict

from django import forms

from annotate.judgement_input import SCALE, JudgementInputError, Verdict, judgement_parse
from annotate.models import Campaign, ImportBatch
from annotate.services.corrections import MAX_CALLS
from core import json_input
from core.ids import parse_index
from core.problems import problem
from webapp.errors import ArbiterError
from webapp.form_input import WholeNumberFormField


class ImportUploadForm(forms.Form):
    file = forms.FileField(
        help_text="JSONL: a trajectory per line (canonical v1, OpenAI chat, Anthropic Messages) or a trace "
        "export (OpenTelemetry GenAI, OpenInference, LangSmith, Langfuse)."
    )
    format = forms.ChoiceField(
        choices=ImportBatch.Format.choices,
        required=False,
        initial=ImportBatch.Format.AUTO,
        help_text="Detect reads the format from the content; name it when detection refuses the file.",
    )
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.order_by("name"),
        required=False,
        help_text="Optional: build comparisons from these trajectories in this campaign.",
    )
    partial_traces = forms.BooleanField(
        required=False,
        label="Partial traces",
        help_text="Import traces whose records name a parent that is not in the file, marked partial "
        "(without it such a file is refused, naming the trace).",
    )

    def clean_format(self) -> str:
        return self.cleaned_data.get("format") or ImportBatch.Format.AUTO


class JudgementForm(forms.Form):
    """A verdict from the comparison screen. The form only shapes what was posted into a judgement
    body (the API's field names, a rating per `rating__<dimension>__<side>` nested); every rule is
    `judgement_parse`'s, so the screen accepts and refuses what the API does, in the same words.

    After `is_valid()`, `verdict` is the Verdict; `cleaned_data` holds what was read (after a
    refusal too, so the screen shows it again)."""

    def __init__(self, *args, dimensions: list[dict] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign_dimensions = list(dimensions)
        self.dimensions = [d["name"] for d in dimensions]
        self.verdict: Verdict | None = None

    def body(self) -> dict:
        data = self.data
        ratings: dict[str, dict] = {}
        # Every posted rating, the campaign's dimensions or not: an unknown one is refused by
        # judgement_parse (as the API refuses it), never dropped.
        for key in data:
            name, _, side = key.removeprefix("rating__").rpartition("__")
            if key.startswith("rating__") and name and data.get(key):
                ratings.setdefault(name, {})[side] = data[key]
        return {
            "choice": data.get("choice"),
            "both_bad": data.get("both_bad"),
            "ratings": {dim: sides for dim, sides in ratings.items() if sides},
            "first_wrong_step_left": data.get("first_wrong_left"),
            "first_wrong_step_right": data.get("first_wrong_right"),
            "rationale": data.get("rationale"),
        }

    def clean(self) -> dict:
        try:
            # The campaign's dimensions: a rating out of a 1-5 scale is refused as "1-5", not "1-10".
            self.verdict = judgement_parse(self.body(), dimensions=self.campaign_dimensions)
        except JudgementInputError as exc:
            self.cleaned_data.update(exc.accepted)
            raise forms.ValidationError(exc.message) from None
        return asdict(self.verdict)


class SkipForm(forms.Form):
    reason = forms.CharField(max_length=500, strip=True, error_messages={"required": "Say why you skip."})


class AdjudicateForm(forms.Form):
    """No default: the adjudicator picks a point on the scale."""

    choice = WholeNumberFormField(
        min_value=SCALE.start,
        max_value=SCALE[-1],
        error_messages={
            "required": "Pick the adjudicated label (A much better … B much better): nothing was recorded.",
            "invalid": "Pick the adjudicated label from the list.",
            "min_value": f"The scale runs from {SCALE.start} to {SCALE[-1]}.",
            "max_value": f"The scale runs from {SCALE.start} to {SCALE[-1]}.",
        },
    )
    note = forms.CharField(required=False, max_length=5000)


def correction_body(post) -> dict:
    """The correction form's fields as the API's body (annotate/services/corrections.py reads both):
    one row of `tool`, `arguments` (JSON text) and `observation` per call, rows left empty dropped."""
    body = {"side": post.get("side", ""), "kind": post.get("kind", "")}
    if body["kind"] == "answer":
        body["answer"] = post.get("answer", "")
        return body
    step = post.get("step", "").strip()
    index = parse_index(step)
    body["step"] = step if index is None else index  # a bad step goes on as text, refused with the reason
    calls, problems = [], []
    rows = zip(post.getlist("tool"), post.getlist("arguments"), post.getlist("observation"))
    for i, (tool, arguments, observation) in enumerate(list(rows)[: MAX_CALLS + 1]):
        if not tool.strip() and not arguments.strip():
            continue
        try:
            parsed = json_input.loads(arguments.strip() or "{}")
        except json_input.JsonInputError as exc:
            problems.append(problem(f"not JSON: {exc}", field=f"calls[{len(calls)}].arguments"))
            parsed = None
        calls.append({"tool": tool.strip(), "arguments": parsed, "observation": observation})
    if problems:
        raise ArbiterError("The correction was not stored: the arguments of a call are not JSON.", details=problems)
    body["calls"] = calls
    if post.get("answer", "").strip():
        body["answer"] = post["answer"]
    return body
