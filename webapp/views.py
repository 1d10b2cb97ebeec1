"""Core views that need no domain app (the home page lives in annotate: it shows its counts)."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webapp.errors import ArbiterError
from webapp.roles import Role, user_has_role, user_roles
from webapp.tokens import api_token_create, api_token_revoke, api_tokens_of


def health(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and the benchmark's baseline: no database, no session."""
    return JsonResponse({"ok": True})


# Error pages in the site's layout (API paths get JSON from webapp.api_errors instead). Each says
# what went wrong in words and what to do next, with links to go on from.

# Sections of the site by path: where a reader goes back to, and who may open it.
_SECTIONS = (
    ("/runs/", "runs:list", "the runs", (Role.RESEARCHER, Role.ADMIN)),
    ("/annotate/campaigns/", "annotate:campaigns", "the campaigns", tuple(Role)),
    ("/annotate/comparisons/", "annotate:campaigns", "the campaigns", tuple(Role)),
    ("/annotate/datasets/", "annotate:datasets", "the datasets", (Role.RESEARCHER, Role.ADMIN)),
    ("/annotate/imports/", "annotate:imports", "the imports", (Role.ADMIN,)),
    ("/training/policies/", "training:policies", "the policies", (Role.RESEARCHER, Role.ADMIN)),
    ("/training/evaluations/", "training:evaluations", "the evaluations", (Role.RESEARCHER, Role.ADMIN)),
    ("/reward-models/", "rewardmodel:registry", "the reward models", (Role.RESEARCHER, Role.ADMIN)),
    ("/team/users/", "team-users", "the users", (Role.ADMIN,)),
)
_NO_MATCH = re.compile(r"^No (\w+) matches the given query\.?$")


def _links(request) -> list[tuple[str, str]]:
    """(text, url) to go on from an error: the section the address is in, when the user may open it."""
    links = []
    user = getattr(request, "user", None)
    for prefix, url_name, text, roles in _SECTIONS:
        if request.path.startswith(prefix) and user is not None and user_has_role(user, *roles):
            links.append((f"Go to {text}", reverse(url_name)))
            break
    return links


def _error_page(
    request,
    *,
    status: int,
    title: str,
    message: str,
    advice: str,
    links: list[tuple[str, str]] | None = None,
    login: bool = False,
) -> HttpResponse:
    try:
        return render(
            request,
            "webapp/error.html",
            {
                "status": status,
                "title": title,
                "message": message,
                "advice": advice,
                "links": links or [],
                "login": login,
            },
            status=status,
        )
    except Exception:  # the error page must not fail in turn (a broken template, no database)
        return HttpResponse(f"{title}: {message}", status=status, content_type="text/plain")


def _reason(exception, default: str) -> str:
    """The message an exception was raised with, when it is one meant for people."""
    text = exception.args[0] if exception is not None and exception.args else ""
    return text if isinstance(text, str) and text.strip() else default


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        return _error_page(
            request,
            status=413,
            title="Too large",
            message=str(exception),
            advice="Split the file, or ask an admin to raise the limit.",
        )
    return _error_page(
        request,
        status=400,
        title="Bad request",
        message="The request could not be read.",
        advice="Go back and try again.",
    )


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    """Every 403 of the HTML side: a role check, a `PermissionDenied` raised in a view (its message is
    shown), and the CSRF failure page (`csrf_failure`)."""
    user = getattr(request, "user", None)
    message = _reason(exception, "Your role does not allow this page.")
    if user is None or not user.is_authenticated:
        advice = "Log in with an account that has the role this page needs."
    else:
        held = ", ".join(sorted(r.value for r in user_roles(user))) or "no role yet"
        advice = (
            f"You are logged in as {user.username} ({held}). Ask an admin to give you the role you need "
            f"(on the Users page), or log in as someone who has it."
        )
    return _error_page(
        request, status=403, title="Not allowed", message=message, advice=advice, links=_links(request), login=True
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted without a valid CSRF token: most often a page left open past a new login."""
    return permission_denied(
        request,
        PermissionDenied(
            "This form could not be accepted: it was opened before you last logged in, or it came from another site. "
            "Reload the page and send it again."
        ),
    )


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    message = _reason(exception, "There is nothing at this address.")
    match = _NO_MATCH.match(message)
    if match:  # get_object_or_404's "No DatasetSnapshot matches the given query."
        thing = re.sub(r"(?<!^)(?=[A-Z])", " ", match.group(1)).lower()
        message = f"There is no {thing} with this id."
    return _error_page(
        request,
        status=404,
        title="Not found",
        message=message,
        advice="The link may be old, mistyped, or what it pointed at was deleted. "
        "Use the menu above, or go back to where you came from.",
        links=_links(request),
    )


def server_error(request: HttpRequest) -> HttpResponse:
    return _error_page(
        request,
        status=500,
        title="Server error",
        message="Something failed on the server.",
        advice="It has been logged; try again in a moment.",
    )


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page says: send them to the icon."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


# A user's own API tokens.


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """List, create (the key is shown once) and revoke the signed-in user's API tokens."""
    new_key, error, status = "", "", 200
    if request.method == "POST":
        try:
            _, new_key = api_token_create(user=request.user, name=request.POST.get("name", ""))
        except ArbiterError as exc:
            error, status = exc.message, 400
    return render(
        request,
        "webapp/tokens.html",
        {"tokens": api_tokens_of(request.user), "new_key": new_key, "error": error},
        status=status,
    )


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    if api_token_revoke(user=request.user, token_id=token_id):
        messages.success(request, "Token revoked: it no longer works.")
    else:
        messages.error(request, f"You have no token with id {token_id}.")
    return redirect("tokens")
