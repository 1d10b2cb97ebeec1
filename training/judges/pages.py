"""Judge pages: the judges (researchers and admins), a form to add or edit one (admins), and a
judge's page with its runs and its audit log. A judge votes through a run (`judge` kind)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotate.models import Judge, JudgeCall
from rewardmodel.models import RewardModel
from training.judges.services import judge_create, judge_key_source, judge_update
from webapp.access import role_required
from webapp.errors import ArbiterError
from webapp.form_input import WholeNumberFormField
from webapp.models import Run
from webapp.roles import Role, user_has_role

CHAT_NUMBERS = {
    "temperature": float,
    "timeout_s": float,
    "concurrency": int,
    "requests_per_minute": float,
    "max_retries": int,
    "max_tokens": int,
    "price_input_per_mtok": float,
    "price_output_per_mtok": float,
    "max_cost_usd": float,
    "max_failures_in_a_row": int,
}


class JudgeForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=Judge.Kind.choices)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    reward_model_id = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Reward model")
    base_url = forms.CharField(required=False, label="Endpoint (base URL)", help_text="e.g. http://127.0.0.1:8000/v1")
    model = forms.CharField(required=False, max_length=300)
    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        label="API key",
        help_text="Stored encrypted and never shown again. Leave empty to keep the stored one.",
    )
    remove_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    api_key_env = forms.CharField(
        required=False, label="Or read the key from this environment variable (on the worker)"
    )
    confirm_key_env = forms.BooleanField(
        required=False,
        label="Send the key from this variable to the new endpoint",
        help_text="Needed once, with a change of the endpoint's scheme, host or port: the key was named for the old one.",
    )
    structured_output = forms.ChoiceField(
        choices=[("json_schema", "JSON schema"), ("json_object", "JSON object"), ("prompt", "Schema in the prompt")],
        initial="json_schema",
    )
    temperature = forms.FloatField(required=False, initial=0.0)
    timeout_s = forms.FloatField(required=False, initial=60.0, label="Timeout (s)")
    concurrency = WholeNumberFormField(required=False, initial=4)
    requests_per_minute = forms.FloatField(required=False, initial=60.0, help_text="0: no limit.")
    max_retries = WholeNumberFormField(required=False, initial=4)
    max_tokens = WholeNumberFormField(required=False, initial=1024)
    price_input_per_mtok = forms.FloatField(required=False, initial=0.0, label="Price per million input tokens ($)")
    price_output_per_mtok = forms.FloatField(required=False, initial=0.0, label="Price per million output tokens ($)")
    max_cost_usd = forms.FloatField(required=False, label="Cost cap per run ($)", help_text="Empty: no cap.")
    max_failures_in_a_row = WholeNumberFormField(
        required=False,
        initial=5,
        label="Give up after this many failed calls in a row",
        help_text="Calls with no reply from the model (connection refused, timeouts, HTTP errors but 429). 0: never. "
        "A 401, 403 or 404 gives up at once.",
    )

    def __init__(self, *args, editing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["reward_model_id"].choices = [("", "—")] + [
            (m.pk, str(m)) for m in RewardModel.objects.order_by("-created_at")[:200]
        ]
        self.editing = editing
        if editing:
            self.fields["kind"].disabled = True

    def judge_data(self) -> dict:
        """The judge's fields as the service checks them (training/judges/services.py)."""
        c = self.cleaned_data
        data = {"name": c["name"], "kind": c["kind"], "description": c["description"]}
        if c["kind"] == Judge.Kind.REWARD_MODEL:
            data["config"] = {"reward_model_id": c["reward_model_id"]}
        elif c["kind"] == Judge.Kind.CHAT:
            config = {"base_url": c["base_url"], "model": c["model"], "structured_output": c["structured_output"]}
            # On an edit the variable is sent when changed or confirmed, so that a move of the endpoint
            # does not carry the key along by the form's own prefilled value (services.judge_clean).
            if not self.editing or "api_key_env" in self.changed_data or c["confirm_key_env"]:
                config["api_key_env"] = c["api_key_env"]
            config.update({k: c[k] for k in CHAT_NUMBERS if c.get(k) is not None})
            data["config"] = config
            if c["remove_api_key"]:
                data["api_key"] = ""
            elif c["api_key"]:
                data["api_key"] = c["api_key"]
        else:
            data["config"] = {}
        return data


def _initial(judge: Judge) -> dict:
    return {"name": judge.name, "kind": judge.kind, "description": judge.description, **judge.config}


@role_required(Role.RESEARCHER, Role.ADMIN)
def judges(request: HttpRequest) -> HttpResponse:
    """The judges, and a form to add one (admins)."""
    form = JudgeForm(request.POST or None)
    if request.method == "POST":
        if not user_has_role(request.user, Role.ADMIN):
            return render(
                request, "annotate/error.html", {"message": "Adding a judge needs the admin role."}, status=403
            )
        if form.is_valid():
            try:
                judge = judge_create(data=form.judge_data(), created_by=request.user)
            except ArbiterError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"Judge {judge.name} added.")
                return redirect("training:judge", judge_id=judge.pk)
    rows = Judge.objects.annotate(n_votes=Count("votes", filter=Q(votes__probe="first"))).order_by("name")
    return render(
        request,
        "training/judges.html",
        {"judges": rows, "form": form},
        status=400 if request.method == "POST" else 200,
    )


@role_required(Role.RESEARCHER, Role.ADMIN)
def judge(request: HttpRequest, judge_id: int) -> HttpResponse:
    """A judge: settings (never its key), edit form (admins), runs and the audit log."""
    row = get_object_or_404(Judge, pk=judge_id)
    form = JudgeForm(request.POST or None, initial=_initial(row), editing=True)
    if request.method == "POST":
        if not user_has_role(request.user, Role.ADMIN):
            return render(
                request, "annotate/error.html", {"message": "Editing a judge needs the admin role."}, status=403
            )
        if form.is_valid():
            data = form.judge_data()
            data.pop("kind")
            try:
                judge_update(judge=row, data=data)
            except ArbiterError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"Judge {row.name} saved.")
                return redirect("training:judge", judge_id=row.pk)
    runs = Run.objects.filter(kind="judge", config__judge_id=row.pk).order_by("-created_at")[:50]
    calls = JudgeCall.objects.filter(judge=row).order_by("-id")[:50] if user_has_role(request.user, Role.ADMIN) else []
    return render(
        request,
        "training/judge.html",
        {"judge": row, "form": form, "key_source": judge_key_source(row), "runs": runs, "calls": calls},
        status=400 if request.method == "POST" else 200,
    )
