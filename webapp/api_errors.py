"""DRF exception handler: domain errors and oversized bodies become clear 4xx answers."""
from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from webapp.errors import ArbiterError


def exception_handler(exc, context):
    if isinstance(exc, ArbiterError):
        body = {"detail": exc.message}
        if exc.details:
            body["errors"] = exc.details
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {"detail": "Request body is larger than the upload limit (API_MAX_BODY_BYTES)."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    return drf_exception_handler(exc, context)
