"""Core views that need no domain app (the home page lives in annotate: it shows its counts)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.errors import ArbiterError
from webapp.tokens import api_token_create, api_token_revoke, api_tokens_of


def health(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and the benchmark's baseline: no database, no session."""
    return JsonResponse({"ok": True})


# Error pages in the site's layout (API paths get JSON from webapp.api_errors instead).

def _error_page(request, *, status: int, title: str, message: str, advice: str) -> HttpResponse:
    try:
        return render(request, "webapp/error.html",
                      {"title": title, "message": message, "advice": advice}, status=status)
    except Exception:  # the error page must not fail in turn (a broken template, no database)
        return HttpResponse(f"{title}: {message}", status=status, content_type="text/plain")


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        return _error_page(request, status=413, title="Too large", message=str(exception),
                           advice="Split the file, or ask an admin to raise the limit.")
    return _error_page(request, status=400, title="Bad request", message="The request could not be read.",
                       advice="Go back and try again.")


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _error_page(request, status=403, title="Not allowed",
                       message="Your role does not allow this page.",
                       advice="Ask an admin for the role you need, or sign in as another user.")


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _error_page(request, status=404, title="Not found", message="There is nothing at this address.",
                       advice="The link may be old, or the object deleted.")


def server_error(request: HttpRequest) -> HttpResponse:
    return _error_page(request, status=500, title="Server error", message="Something failed on the server.",
                       advice="It has been logged; try again in a moment.")


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
    return render(request, "webapp/tokens.html",
                  {"tokens": api_tokens_of(request.user), "new_key": new_key, "error": error}, status=status)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    if api_token_revoke(user=request.user, token_id=token_id):
        messages.success(request, "Token revoked: it no longer works.")
    else:
        messages.error(request, f"You have no token with id {token_id}.")
    return redirect("tokens")
