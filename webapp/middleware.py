"""Content-Security-Policy on every response: no inline script, nothing from elsewhere; and the
request body limits, checked before a body is read.

Trajectory text is untrusted; escaping is the first defence and this header the second:
even if markup slipped through, an inline <script> or on* handler would not run.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

from webapp.api_errors import API_PREFIX, error_body
from webapp.uploads import anonymous_limit, body_limit, body_refusal, declared_length
from webapp.views import bad_request

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response


class BodyLimitMiddleware:
    """Refuse a request body over its route's limit from its declared length, before anything
    reads it (issue 53: a 45 MB anonymous POST /login/ was read whole by CSRF's form parsing).

    First in MIDDLEWARE, so its `process_view` runs before CsrfViewMiddleware's and the view's,
    the first two readers of a body; by then the route is resolved and the user is known. The
    refusal is a 413 that names the limit and its setting: JSON under /api/, a page elsewhere."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        declared = declared_length(request)
        if not declared:
            return None
        limit = body_limit(request.resolver_match.view_name if request.resolver_match else None)
        anonymous = anonymous_limit()
        if limit.limit > anonymous.limit and declared > anonymous.limit and _anonymous(request):
            limit = anonymous
        if declared <= limit.limit:
            return None
        message = body_refusal(declared, limit, request)
        if request.path.startswith(API_PREFIX):
            return JsonResponse(error_body(message), status=413)
        return bad_request(request, RequestDataTooBig(message))


def _anonymous(request) -> bool:
    """Nobody logged in: no API token offered and no session with a user (a token is checked by
    the API's view, which reads no body before it has)."""
    return not request.META.get("HTTP_AUTHORIZATION") and not request.user.is_authenticated
