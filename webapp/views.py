"""Core pages: the home page that shows each role what it may do."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


@login_required
def home(request: HttpRequest) -> HttpResponse:
    from annotate.selectors import campaigns_with_counts, domain_counts

    return render(
        request,
        "webapp/home.html",
        {"counts": domain_counts(), "campaigns": campaigns_with_counts()[:10]},
    )


def health(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and the benchmark's baseline: no database, no session."""
    return JsonResponse({"ok": True})
