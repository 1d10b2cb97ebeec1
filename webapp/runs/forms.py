"""The launch form of a run kind, built from its config dataclass (fields, defaults, help).

Ids are picked, never typed: a field the kind gives `choices` for is a select, and so is a
field whose name says what it points at (`..._policy_id`, `snapshot_id`, `rl_run_id`, ...);
a list of ids (`policy_ids`) is a list of checkboxes with a filter box. Fields come in order
of importance: the rows the run reads first, then the other choices, then text, then numbers
and switches. Every problem is reported in one round: the fields Django could read are put
into the config, and the config's own `validate()` and the kind's database check run on it
even when another field was refused.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid

from django import forms

from core.configs import simple_fields
from webapp.form_input import WholeNumberFormField
from webapp.models import Run
from webapp.runs.kinds import RunKind
from webapp.runs.selectors import policy_in_training

logger = logging.getLogger(__name__)
_FIELDS = {int: WholeNumberFormField, float: forms.FloatField, str: forms.CharField}
# Choices that are suggestions, not a closed list: an environment may also be a class by dotted path
# from a module the deployment allows, which no list can hold; the kind's check decides.
OPEN_CHOICES = {"environment", "dev_environment", "eval_environment"}


class SuggestedInput(forms.TextInput):
    """A text input with its known values offered beside it (a datalist)."""

    def __init__(self, suggestions: list[tuple], attrs=None):
        super().__init__(attrs)
        self.suggestions = suggestions

    def render(self, name, value, attrs=None, renderer=None):
        from django.utils.html import format_html, format_html_join

        list_id = f"{(attrs or {}).get('id') or name}-suggestions"
        field = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join("", '<option value="{}">', ((str(v),) for v, _ in self.suggestions))
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, options)


_PROBLEM_FIELD = re.compile(r"^([a-z_][a-z0-9_]*):\s")
SECTIONS = ("What it runs on", "Settings")


def _runs(kinds: tuple[str, ...] = ()):
    def choices():

        runs = Run.objects.order_by("-created_at")
        if kinds:
            runs = runs.filter(kind__in=kinds)
        return [(r.pk, f"#{r.pk} {r.name} ({r.kind}, {r.status})") for r in runs[:300]]

    return choices


# Fields a kind gives no choices for, read by their name: (pattern, choices, several ids). Each app
# adds the pickers of its own rows in its AppConfig.ready (`picker_register`): webapp sits below
# the apps and imports none of their models.
PICKERS: list[tuple[re.Pattern, object, bool]] = []


def picker_register(pattern: str, choices, *, several: bool = False) -> None:
    """Offer `choices()` ([(id, label)]) for every config field whose name matches `pattern`;
    the first registered match wins."""
    PICKERS.append((re.compile(pattern), choices, several))


picker_register(r"^(ppo|rl)_run_id$", _runs(("ppo", "rloo", "grpo")))
picker_register(r"(^|_)run_id$", _runs())


# What to do first where a run needs a row that does not exist yet, by what the field points at.
FIRST_STEPS = {
    "judge": "create one on the Judges page (a rubric judge needs nothing else)",
    "reward model": "train one with a Reward model run on a dataset snapshot",
    "snapshot": "take one on a campaign's Datasets page once it has votes",
    "policy": "train the default policy (a Behaviour cloning run) or register one (manage.py register_policy)",
    "campaign": "create one on the Campaigns page",
    "loop": "start one with manage.py run_pipeline",
}


def _first_step(noun: str) -> str:
    """What to do before a run that needs a `noun` none of which exists yet."""
    if noun == "policy":
        training = policy_in_training()
        if training is not None:
            return (
                f"the default policy is still training in run #{training.pk} ({training.status}, "
                f"{training.progress:.0%}); launch this once it has succeeded"
            )
    return FIRST_STEPS.get(noun, f"create a {noun} first")


_DATE = re.compile(r"(^|_)(date|day|on)$")
_DATETIME = re.compile(r"(_at|deadline|_time|_until)$")


def _picker(name: str):
    for pattern, choices, several in PICKERS:
        if pattern.search(name):
            return choices, several
    return None


def _noun(name: str) -> str:
    """What an id field points at, in words: `eval_policy_id` -> "policy"."""
    words = re.sub(r"_ids?$", "", name).split("_")
    nouns = ("reward model", "snapshot", "policy", "campaign", "run", "loop", "environment")
    text = " ".join(words)
    return next((noun for noun in nouns if noun in text), text)


_ACRONYMS = {
    "ppo": "PPO",
    "rl": "RL",
    "kl": "KL",
    "rm": "RM",
    "bc": "BC",
    "rloo": "RLOO",
    "grpo": "GRPO",
    "lr": "LR",
    "ece": "ECE",
    "mcp": "MCP",
}
_COMMAS = re.compile(r",?\s*(as )?ids,? separated by commas")


def field_label(name: str, *, picker: bool = False) -> str:
    """A config field's label: a picker's `rl_run_id` -> "RL run", `policy_ids` -> "Policies"; `max_context` ->
    "Max context"."""
    words = name.split("_")
    if picker and len(words) > 1 and words[-1] in ("id", "ids"):
        plural = words.pop() == "ids"
        if plural:
            last = words[-1]
            words[-1] = last[:-1] + "ies" if last.endswith("y") else last + "s"
    text = " ".join(_ACRONYMS.get(w, w) for w in words)
    return text[:1].upper() + text[1:]


class IdsField(forms.MultipleChoiceField):
    """Several ids, ticked in a list; stored as the config's text, "3,5,8". A comma-separated string
    posted by a script is read as well."""

    widget = forms.CheckboxSelectMultiple

    def to_python(self, value):
        if value in self.empty_values:
            return []
        values = [value] if isinstance(value, str) else list(value)
        return [part.strip() for v in values for part in str(v).split(",") if part.strip()]

    def clean(self, value):
        return ",".join(super().clean(value))

    def prepare_value(self, value):
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


class RunLaunchForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        required=False,
        label="Run name",
        help_text="Optional; shown in the runs list (default: the kind's name).",
    )
    # A fresh key per rendered form: a double-clicked submit launches one run, not two.
    idempotency_key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, kind: RunKind, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.config_names: list[str] = []
        self.pickers: list[str] = []
        self.empty_pickers: list[str] = []  # pickers with no row to pick yet
        self.fields["idempotency_key"].initial = uuid.uuid4().hex
        for name, suggest in kind.suggest.items():
            if name not in self.initial and (value := suggest()) is not None:
                self.initial[name] = value  # a link's own value wins
        ranked = []
        for position, (name, kind_type, default, help_text) in enumerate(simple_fields(kind.config_class)):
            field, rank = self._field(name, kind_type, default, help_text)
            self.fields[name] = field
            self.config_names.append(name)
            order = list(kind.choices).index(name) if name in kind.choices else len(kind.choices) + position
            ranked.append((rank, order, name))
        ranked.sort()
        # The run's own name leads the settings, unless the config has a `name` of its own (which then names both).
        names = [name for rank, _, name in ranked if rank < 2]
        rest = [name for rank, _, name in ranked if rank >= 2]
        self.order_fields(["idempotency_key"] + names + (["name"] if "name" not in self.config_names else []) + rest)
        self.section_of = {name: SECTIONS[0] for name in names}

    def _field(self, name: str, kind_type: type, default, help_text: str) -> tuple[forms.Field, int]:
        """The form field for a config field, and its rank: 0 ids of rows, 1 other choices, 2 text, 3 the rest."""
        picker = _picker(name)
        label = field_label(name, picker=picker is not None or name in self.kind.choices)
        if name in OPEN_CHOICES and name in self.kind.choices and kind_type is str:
            suggestions = list(self.kind.choices[name]())
            return forms.CharField(
                initial=default,
                label=label,
                help_text=help_text,
                required=False,
                empty_value=default,
                widget=SuggestedInput(suggestions),
            ), 1
        if name in self.kind.choices or (picker and kind_type in (int, str)):
            several = picker is not None and picker[1] and name not in self.kind.choices
            choices = list(self.kind.choices[name]() if name in self.kind.choices else picker[0]())
            self.pickers.append(name)
            is_id = picker is not None
            if several:
                help_text = _COMMAS.sub("", help_text)  # ticked in a list here; the API takes "3,5"
                return IdsField(
                    choices=[(str(v), label_) for v, label_ in choices],
                    required=False,
                    label=label,
                    help_text=help_text,
                    initial=default,
                ), 0
            if name not in self.kind.choices and default == 0 and all(v != 0 for v, _ in choices):
                choices = [(0, "(none)")] + choices
            if not choices:
                choices = [("", f"(no {_noun(name)} yet)")]
                self.empty_pickers.append(name)
            coerce = kind_type if kind_type in (int, float, str) else str
            # Left out of a post, a choice takes its default, as a field missing from an API config does.
            return forms.TypedChoiceField(
                choices=choices,
                coerce=coerce,
                initial=default,
                label=label,
                help_text=help_text,
                required=False,
                empty_value=default,
            ), 0 if is_id else 1
        if kind_type is bool:
            return forms.BooleanField(required=False, initial=default, label=label, help_text=help_text), 3
        if kind_type is str and _DATE.search(name):
            widget = forms.DateInput(attrs={"type": "date"})
        elif kind_type is str and _DATETIME.search(name):
            widget = forms.DateTimeInput(attrs={"type": "datetime-local"})
        else:
            widget = None
        # A number left empty takes its default, as a field missing from an API config does.
        field_class = _FIELDS[kind_type]
        field = field_class(
            initial=default, label=label, help_text=help_text, required=False, **({"widget": widget} if widget else {})
        )
        if kind_type is float:
            field.widget.attrs.setdefault("step", "any")
        return field, 2 if kind_type is str else 3

    def sections(self) -> list[tuple[str, list]]:
        """The visible fields in their order, split into the rows the run reads and its settings."""
        first = [f for f in self.visible_fields() if self.section_of.get(f.name) == SECTIONS[0]]
        rest = [f for f in self.visible_fields() if self.section_of.get(f.name) != SECTIONS[0]]
        return [(title, fields) for title, fields in zip(SECTIONS, (first, rest)) if fields]

    def clean(self):
        cleaned = super().clean()
        values = {
            name: cleaned[name]
            for name in self.config_names
            if name in cleaned and cleaned[name] is not None and name not in self.errors
        }
        for name in self.empty_pickers:
            if not values.get(name):  # nothing to pick: say how to make one, not "no X with id 0"
                noun = _noun(name)
                self.add_error(name, f"no {noun} yet: {_first_step(noun)}.")
        refused = set(self.errors)
        for problem in self._problems(values):
            about = self._fields_of(problem, values)
            if refused.intersection(about):
                continue  # a field it may be about already says what is wrong with it
            self.add_error(about[0] if len(about) == 1 else None, problem)
        return cleaned

    def _problems(self, values: dict) -> list[str]:
        """The config's own problems and the kind's database check, both on what could be read."""
        cls = self.kind.config_class
        known = {f.name for f in dataclasses.fields(cls)}
        try:
            config = cls(**{k: v for k, v in values.items() if k in known})
        except (TypeError, ValueError) as exc:
            return [str(exc)]
        problems: list[str] = []
        validate = getattr(config, "validate", None)
        for step in ((validate,) if validate else ()) + (lambda: self.kind.check(config),):
            try:
                problems += [p for p in step() if p not in problems]
            except Exception:  # a check that trips over a refused field; the launch checks again
                logger.warning("run form: a check of %s failed on a partial config", self.kind.name, exc_info=True)
        return problems

    def _fields_of(self, problem: str, values: dict) -> list[str]:
        """The fields a problem may be about: its "field:" prefix, else the pickers it names (narrowed
        to those holding the id it names). Two pickers of one noun at the same id (an empty policy
        and its default reference, both 0) are both candidates: when either was refused already
        ("no policy yet"), the problem ("No policy with id 0") says nothing more."""
        match = _PROBLEM_FIELD.match(problem)
        if match and match.group(1) in self.config_names:
            return [match.group(1)]
        text = problem.lower()
        named = [name for name in self.pickers if re.search(rf"\b{re.escape(_noun(name))}\b", text)]
        if len(named) > 1:
            named = [name for name in named if re.search(rf"\bid {re.escape(str(values.get(name)))}\b", text)]
        return named

    def error_list(self) -> list[tuple[str, str, str]]:
        """(field id or "", label, message) for every problem, for the summary above the form."""
        rows = [("", "", e) for e in self.non_field_errors()]
        for field in self.visible_fields():  # the label links to the field; a "name:" prefix would repeat it
            rows += [(field.id_for_label, field.label, e.removeprefix(f"{field.name}: ")) for e in field.errors]
        return rows

    def config(self) -> dict:
        return {name: self.cleaned_data[name] for name in self.config_names if self.cleaned_data.get(name) is not None}
