"""The Users pages' forms: they check shapes and lengths; the rules live in webapp.users.services."""

from __future__ import annotations

from django import forms

from webapp.roles import Role
from webapp.users.services import EMAIL_MAX, PASSWORD_MAX, USERNAME_MAX

ROLE_CHOICES = [(r.value, r.value) for r in Role]
ROLE_ERROR = {"invalid_choice": "%(value)s is not a role; the roles are " + ", ".join(r.value for r in Role) + "."}


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=USERNAME_MAX)
    email = forms.CharField(max_length=EMAIL_MAX, required=False)
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False, error_messages=ROLE_ERROR)
    how = forms.ChoiceField(choices=[("invite", "invite"), ("password", "password")], initial="invite")
    password = forms.CharField(max_length=PASSWORD_MAX, required=False, strip=False)


class UserEditForm(forms.Form):
    email = forms.CharField(max_length=EMAIL_MAX, required=False)
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False, error_messages=ROLE_ERROR)


class PasswordResetForm(forms.Form):
    how = forms.ChoiceField(choices=[("link", "link"), ("password", "password")])
    password = forms.CharField(max_length=PASSWORD_MAX, required=False, strip=False)


def form_error(form: forms.Form) -> str:
    """A form's errors as one sentence for the page."""
    return " ".join(
        f"{name}: {msg}" if name != "__all__" else msg for name, msgs in form.errors.items() for msg in msgs
    )
