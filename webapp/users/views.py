"""The Users pages (admins): the team's list with a create/invite form, and one user's page.

Every change is a plain POST that redirects back to the user's page. A secret made by a
change (a generated password, a set-password link, a token's key) is kept in the admin's
session and shown once by the next page, never put in an address or a cookie.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webapp.access import role_required
from webapp.errors import ArbiterError
from webapp.roles import Role
from webapp.tokens import api_token_create, api_token_revoke, api_tokens_of
from webapp.users.forms import PasswordResetForm, UserCreateForm, UserEditForm, form_error
from webapp.users.selectors import user_get, users_list
from webapp.users.services import (
    user_create,
    user_deactivate,
    user_invite,
    user_password_reset_link,
    user_password_set,
    user_reactivate,
    user_update,
)

User = get_user_model()
SECRET_SESSION_KEY = "team_secret"
ROLE_NAMES = [r.value for r in Role]


def _secret_keep(request: HttpRequest, *, user, kind: str, value: str) -> None:
    request.session[SECRET_SESSION_KEY] = {"user_id": user.pk, "kind": kind, "value": value}


def _secret_take(request: HttpRequest, user) -> dict | None:
    secret = request.session.pop(SECRET_SESSION_KEY, None)
    return secret if isinstance(secret, dict) and secret.get("user_id") == user.pk else None


@require_http_methods(["GET", "POST"])
@role_required(Role.ADMIN)
def users(request: HttpRequest) -> HttpResponse:
    """Every user, and the form that creates one (with a password) or invites one (with a link)."""
    form = UserCreateForm(request.POST or None, initial={"how": "invite"})
    error = ""
    if request.method == "POST":
        if not form.is_valid():
            error = form_error(form)
        else:
            d = form.cleaned_data
            try:
                user = _create(request, d)
            except ArbiterError as exc:
                error = exc.message
            else:
                messages.success(request, f"Created {user.username}.")
                if not d["roles"]:
                    messages.warning(
                        request,
                        f"{user.username} has no role: they can log in but see no campaign, "
                        "run or dataset until you give them one below.",
                    )
                return redirect("team-user", user_id=user.pk)
    return render(
        request,
        "webapp/users/list.html",
        {"users": users_list(), "form": form, "error": error, "role_names": ROLE_NAMES},
        status=400 if error else 200,
    )


def _create(request: HttpRequest, d: dict):
    fields = {"username": d["username"], "email": d["email"], "roles": d["roles"]}
    if d["how"] == "invite":
        if d["password"]:
            raise ArbiterError("Choose one: invite them (leave the password empty) or set a password now.")
        user, path = user_invite(**fields)
        _secret_keep(request, user=user, kind="link", value=request.build_absolute_uri(path))
        return user
    user, password = user_create(**fields, password=d["password"] or None)
    if not d["password"]:
        _secret_keep(request, user=user, kind="password", value=password)
    return user


@require_GET
@role_required(Role.ADMIN)
def user_detail(request: HttpRequest, user_id: int) -> HttpResponse:
    member = user_get(user_id)
    if member is None:
        raise Http404("No such user.")
    return render(
        request,
        "webapp/users/detail.html",
        {
            "member": member,
            "tokens": api_tokens_of(member),
            "secret": _secret_take(request, member),
            "role_names": ROLE_NAMES,
            "is_self": member.pk == request.user.pk,
        },
    )


def _done(request: HttpRequest, user_id: int, *, error: str = "", success: str = "") -> HttpResponse:
    if error:
        messages.error(request, error)
    elif success:
        messages.success(request, success)
    return redirect("team-user", user_id=user_id)


@require_POST
@role_required(Role.ADMIN)
def user_edit_post(request: HttpRequest, user_id: int) -> HttpResponse:
    user = get_object_or_404(User, pk=user_id)
    form = UserEditForm(request.POST)
    if not form.is_valid():
        return _done(request, user_id, error=form_error(form))
    try:
        user_update(actor=request.user, user=user, email=form.cleaned_data["email"], roles=form.cleaned_data["roles"])
    except ArbiterError as exc:
        return _done(request, user_id, error=exc.message)
    return _done(request, user_id, success="Saved the email and roles.")


@require_POST
@role_required(Role.ADMIN)
def user_deactivate_post(request: HttpRequest, user_id: int) -> HttpResponse:
    user = get_object_or_404(User, pk=user_id)
    try:
        user_deactivate(actor=request.user, user=user)
    except ArbiterError as exc:
        return _done(request, user_id, error=exc.message)
    return _done(
        request,
        user_id,
        success=f"{user.username} is deactivated: they can no longer log in or use "
        "their tokens. Their judgements stay.",
    )


@require_POST
@role_required(Role.ADMIN)
def user_reactivate_post(request: HttpRequest, user_id: int) -> HttpResponse:
    user = user_reactivate(user=get_object_or_404(User, pk=user_id))
    return _done(request, user_id, success=f"{user.username} is active again.")


@require_POST
@role_required(Role.ADMIN)
def user_password_post(request: HttpRequest, user_id: int) -> HttpResponse:
    user = get_object_or_404(User, pk=user_id)
    form = PasswordResetForm(request.POST)
    if not form.is_valid():
        return _done(request, user_id, error=form_error(form))
    password = form.cleaned_data["password"]
    try:
        if form.cleaned_data["how"] == "link":
            path = user_password_reset_link(user=user)
            _secret_keep(request, user=user, kind="link", value=request.build_absolute_uri(path))
            return _done(request, user_id, success="Their old password no longer works.")
        if not password:
            raise ArbiterError("Type the new password, or make a set-password link instead.")
        user_password_set(user=user, password=password)
    except ArbiterError as exc:
        return _done(request, user_id, error=exc.message)
    return _done(request, user_id, success=f"Password set; tell {user.username} in person or by another channel.")


@require_POST
@role_required(Role.ADMIN)
def user_token_create_post(request: HttpRequest, user_id: int) -> HttpResponse:
    user = get_object_or_404(User, pk=user_id)
    try:
        _, key = api_token_create(user=user, name=request.POST.get("name", ""), by=request.user)
    except ArbiterError as exc:
        return _done(request, user_id, error=exc.message)
    _secret_keep(request, user=user, kind="token", value=key)
    return _done(request, user_id)


@require_POST
@role_required(Role.ADMIN)
def user_token_revoke_post(request: HttpRequest, user_id: int, token_id: int) -> HttpResponse:
    user = get_object_or_404(User, pk=user_id)
    if api_token_revoke(user=user, token_id=token_id):
        return _done(request, user_id, success="Token revoked: it no longer works.")
    return _done(request, user_id, error=f"{user.username} has no token with id {token_id}.")


class PasswordSetView(auth_views.PasswordResetConfirmView):
    """The set-password link: a deactivated user's link no longer works."""

    def get_user(self, uidb64):
        user = super().get_user(uidb64)
        return user if user is not None and user.is_active else None
