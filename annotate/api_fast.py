"""The two labeling endpoints every annotator script calls in a loop, on a short path.

`GET /api/v1/assignments/next` and `POST /api/v1/assignments/{id}/judgement` are the
hot path of labeling over REST (benchmarks/labeling_cycle.py). DRF's request wrapping,
negotiation, parsers, serializers and renderer cost more than the work itself there, so
the common case is answered by a plain Django view: a token in the `Authorization`
header, a JSON body of the usual shape, the same services, JSON written by orjson.

A judgement body is read by `judgement_parse` (annotate/judgement_input.py), as in the DRF
view, so a refused body gets the same 400 on both paths (tests/annotate/test_judgement_parity.py).
Anything else (session authentication with its CSRF check, a bad or missing token, a role
that may not label, a form body, a body that is not JSON, a query other than a valid
`?campaign=ID`) is handed to the DRF view (annotate/api.py): the short path never answers a
case it does not fully check, and the DRF views stay the documented contract (the schema is
generated from them).
"""

from __future__ import annotations

import orjson
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed

from annotate import api
from annotate.judgement_input import judgement_parse
from annotate.judges.votes import judge_vote_after_submit
from annotate.selectors import assignment_screen_payload
from annotate.services.assignments import assignment_next, campaign_for_labeling, judgement_submit
from core import json_input
from core.ids import parse_id
from webapp.api_errors import error_body, error_items
from webapp.authentication import request_token_authenticate
from webapp.errors import ArbiterError
from webapp.roles import user_has_role

JSON = "application/json"


def _json(data, status: int = 200) -> HttpResponse:
    return HttpResponse(orjson.dumps(data, option=orjson.OPT_UTC_Z), status=status, content_type=JSON)


def _labeler(request):
    """The token's user when they may label; None (hand over to DRF) otherwise."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, key = header.partition(" ")
    if scheme != "Token" or not key or " " in key:
        return None
    try:
        user, _ = request_token_authenticate(request, key)
    except AuthenticationFailed:
        return None
    return user if user_has_role(user, *api.LABELERS) else None


def _refused(exc: Exception) -> HttpResponse:
    if isinstance(exc, PermissionDenied):
        return _json({"detail": str(exc)}, 403)
    return _json(error_body(exc.message, error_items(exc.details)), 400)


def _next(request) -> HttpResponse | None:
    if request.method != "GET" or set(request.GET) != {"campaign"}:
        return None
    user, campaign_id = _labeler(request), parse_id(request.GET["campaign"])
    if user is None or campaign_id is None:
        return None
    campaign = campaign_for_labeling(campaign_id)
    if campaign is None:
        return None
    try:
        assignment = assignment_next(campaign=campaign, annotator=user)
    except (ArbiterError, PermissionDenied) as exc:
        return _refused(exc)
    if assignment is None:
        return HttpResponse(status=204)
    return _json(assignment_screen_payload(assignment_id=assignment.pk))


def _submit(request, assignment_id: int) -> HttpResponse | None:
    if request.method != "POST" or request.content_type != JSON:
        return None
    user = _labeler(request)
    if user is None:
        return None
    try:
        body = json_input.loads(request.body)
    except json_input.JsonInputError:
        return None  # DRF's parser words the refusal
    try:
        judgement, created = judgement_submit(
            assignment_id=assignment_id, annotator=user, verdict=judgement_parse(body)
        )
    except (ArbiterError, PermissionDenied) as exc:
        return _refused(exc)
    return _json(
        {
            "id": judgement.pk,
            "comparison": judgement.comparison_id,
            "choice": judgement.choice,
            "both_bad": judgement.both_bad,
            "ratings": judgement.ratings,
            "first_wrong_step_a": judgement.first_wrong_step_a,
            "first_wrong_step_b": judgement.first_wrong_step_b,
            "rationale": judgement.rationale,
            "seconds": judgement.seconds,
            "synthetic": judgement.synthetic,
            "created_at": judgement.created_at,
            "judge_vote": judge_vote_after_submit(judgement=judgement),
        },
        201 if created else 200,
    )


def short_path(drf_view_class, handler):
    """A view that answers with `handler` when it can (it returns None when it cannot) and
    with the DRF view otherwise. It carries the DRF view's class, so the schema documents it."""
    drf_view = drf_view_class.as_view()

    @csrf_exempt
    def view(request, *args, **kwargs):
        response = handler(request, *args, **kwargs)
        return response if response is not None else drf_view(request, *args, **kwargs)

    view.cls, view.initkwargs = drf_view.cls, drf_view.initkwargs
    return view


assignment_next_view = short_path(api.AssignmentNextApi, _next)
judgement_submit_view = short_path(api.JudgementSubmitApi, _submit)
