"""Every API error is JSON of one shape: `{"detail": "...", "errors": [{"message", "field"?, "line"?}]}`.

Two places produce it: DRF's exception handler (domain errors, validation, auth, parse
errors, oversized bodies) and a middleware for what happens outside DRF's views under
/api/ (an unknown path, an id of the wrong shape, a method no route takes, and, as a last
line of defence, an unexpected exception), which Django would otherwise answer with HTML.
The shape is documented once in the schema (`webapp.api_schema`).
"""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import JsonResponse
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.json_input import shown
from core.problems import Problem, problem, problem_of, problems_text
from webapp.errors import ArbiterError

logger = logging.getLogger(__name__)
API_PREFIX = "/api/"


def error_body(detail: str, errors: list[dict] | None = None) -> dict:
    """The one error shape. Messages may quote the request (a field name, a value): each text is
    made safe to encode (`json_input.shown`), so a refusal never turns into a 500."""
    body = {"detail": shown(str(detail))}
    if errors:
        body["errors"] = [{k: shown(v) if isinstance(v, str) else v for k, v in item.items()} for item in errors]
    return body


def _items(data, field: str = "") -> list[Problem]:
    """DRF's nested validation errors as a flat list of {field, message}."""
    if isinstance(data, dict):
        out = []
        for key, value in data.items():
            name = field if key == "non_field_errors" else (f"{field}.{key}" if field else str(key))
            out.extend(_items(value, name))
        return out
    if isinstance(data, list):
        if all(not isinstance(v, (dict, list)) for v in data):
            return [problem(str(v), field=field) for v in data]
        return [item for i, v in enumerate(data) for item in _items(v, f"{field}[{i}]" if field else f"[{i}]")]
    return [problem(str(data), field=field)]


def error_items(details: list) -> list[Problem]:
    """`ArbiterError.details` (or an import's stored errors) as error items: {message, field?, line?}."""
    return [problem_of(d) for d in details]


def _summary(items: list[Problem]) -> str:
    return "The request is not valid: " + problems_text(items)


def exception_handler(exc, context):
    if isinstance(exc, ArbiterError):
        return Response(error_body(exc.message, error_items(exc.details)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body(str(exc) or "The request body is larger than the upload limit."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):
        return Response(error_body(f"The request was refused: {exc}"), status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        items = _items(response.data)
        response.data = error_body(_summary(items) if items else "The request is not valid.", items)
    else:
        detail = response.data.get("detail") if isinstance(response.data, dict) else None
        response.data = error_body(str(detail or response.status_text))
    return response


class ApiJsonErrorsMiddleware:
    """Under /api/, an error answered outside DRF (404, 405, 500, ...) is JSON too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            request.path.startswith(API_PREFIX)
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            reason = {404: "No such API route or object.", 405: f"Method {request.method} is not allowed here."}
            json_response = JsonResponse(
                error_body(reason.get(response.status_code, response.reason_phrase or "Error.")),
                status=response.status_code,
            )
            if response.has_header("Allow"):
                json_response["Allow"] = response["Allow"]
            return json_response
        return response

    def process_exception(self, request, exception):
        # DRF views answer their own exceptions (above); this is the last line of defence for the rest.
        if not request.path.startswith(API_PREFIX) or isinstance(exception, SuspiciousOperation):
            return None  # Django answers a SuspiciousOperation with a 400, which __call__ makes JSON
        logger.exception("unexpected error on %s %s", request.method, request.path)
        return JsonResponse(error_body("An unexpected error happened on the server; it has been logged."), status=500)
