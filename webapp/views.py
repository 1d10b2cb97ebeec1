"""Core views that need no domain app (the home page lives in annotate: it shows its counts)."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse


def health(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and the benchmark's baseline: no database, no session."""
    return JsonResponse({"ok": True})
