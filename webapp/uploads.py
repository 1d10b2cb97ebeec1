"""Request body limits: each route's, refused from the declared length before a byte is read,
and the upload size limit, enforced while the body arrives rather than after it is stored.

`BodyLimitMiddleware` (webapp/middleware.py) runs before anything reads a body and refuses a
request whose Content-Length is over its route's limit (`body_limit`): a login form takes a
few hundred bytes, a correction at most CORRECTION_MAX_BODY_BYTES, the trajectory import's
JSON API_MAX_BODY_BYTES, an import upload IMPORT_MAX_UPLOAD_BYTES, and every other form or
JSON body FORM_MAX_BODY_BYTES; a request from nobody logged in (no session, no token) at most
ANONYMOUS_MAX_BODY_BYTES whatever the route. A body sent without a length (chunked) is read by
Django as empty: nothing of it reaches a view, so it needs no count.

An upload that declares more than IMPORT_MAX_UPLOAD_BYTES is refused from its
Content-Length before a byte of it is read, and a body that grows past the limit (a
length that lied) stops being read at the limit. Both raise `RequestDataTooBig`, which the
API answers with a 413 and a page with a 400.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler

# Multipart framing (boundaries, headers, the other form fields) on top of the file itself.
MULTIPART_ALLOWANCE = 64 * 1024

# The routes whose bodies are not a form's or a small JSON's, by URL name: the setting that
# bounds them and whether a file comes in multipart framing. Read at each request.
ROUTE_LIMITS = {
    "login": ("ANONYMOUS_MAX_BODY_BYTES", False),
    "logout": ("ANONYMOUS_MAX_BODY_BYTES", False),
    "password_reset_confirm": ("ANONYMOUS_MAX_BODY_BYTES", False),
    "annotate:correction-post": ("CORRECTION_MAX_BODY_BYTES", False),
    "api-assignment-correction": ("CORRECTION_MAX_BODY_BYTES", False),
    "api-trajectories": ("DATA_UPLOAD_MAX_MEMORY_SIZE", False),
    "api-imports": ("IMPORT_MAX_UPLOAD_BYTES", True),
    "annotate:imports": ("IMPORT_MAX_UPLOAD_BYTES", True),
    "api-campaign-gold": ("GOLD_MAX_UPLOAD_BYTES", True),
    "annotate:campaign-gold": ("GOLD_MAX_UPLOAD_BYTES", True),
}
SETTING_NAMES = {"DATA_UPLOAD_MAX_MEMORY_SIZE": "API_MAX_BODY_BYTES"}  # the environment's name where it differs


@dataclass(frozen=True)
class BodyLimit:
    """The most a request's body may hold, and the setting that says so (for the refusal)."""

    limit: int
    setting: str
    what: str = ""  # who the limit is for, where it is not the route itself


def body_limit(url_name: str | None) -> BodyLimit:
    """The body limit of the route named `url_name` (None: no route; the form limit)."""
    setting, multipart = ROUTE_LIMITS.get(url_name or "", ("FORM_MAX_BODY_BYTES", False))
    limit = getattr(settings, setting) + (MULTIPART_ALLOWANCE if multipart else 0)
    return BodyLimit(limit=limit, setting=SETTING_NAMES.get(setting, setting))


def anonymous_limit() -> BodyLimit:
    return BodyLimit(settings.ANONYMOUS_MAX_BODY_BYTES, "ANONYMOUS_MAX_BODY_BYTES", "a request from nobody logged in")


def declared_length(request) -> int:
    """The body's declared length as Django will read the body (0: none, or not a number, which
    Django reads as no body)."""
    return _length_as_django_reads(request.META.get("CONTENT_LENGTH"))


def _length_as_django_reads(raw) -> int:
    """Django's WSGIRequest reads CONTENT_LENGTH with int() (0 when that fails), which also reads
    "３" and "٣" as digits. The limit must count what Django will read, so this is the one place
    that reads a request's number by int() rather than core.ids (scripts/code_rules.py)."""
    try:
        return max(0, int(raw or 0))
    except (TypeError, ValueError):
        return 0


def body_refusal(declared: int, limit: BodyLimit, request) -> str:
    what = limit.what or f"{request.method} {request.path[:200]}"
    return (
        f"The request body is {declared:,} bytes; {what} takes at most {limit.limit:,} bytes "
        f"({limit.setting}). Nothing was read."
    )


class UploadLimitHandler(FileUploadHandler):
    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        limit = settings.IMPORT_MAX_UPLOAD_BYTES
        if content_length and content_length > limit + MULTIPART_ALLOWANCE:
            raise RequestDataTooBig(
                f"The upload is {content_length:,} bytes, over the limit of {limit:,} bytes "
                "(IMPORT_MAX_UPLOAD_BYTES); nothing was read."
            )
        return None

    def receive_data_chunk(self, raw_data, start):
        limit = settings.IMPORT_MAX_UPLOAD_BYTES
        if start + len(raw_data) > limit:
            raise RequestDataTooBig(
                f"The file is over the limit of {limit:,} bytes (IMPORT_MAX_UPLOAD_BYTES); "
                "reading stopped there and nothing was stored."
            )
        return raw_data

    def file_complete(self, file_size):
        return None


def body_too_big(request, limit: int, what: str) -> None:
    """Refuse a body over `limit` bytes from its Content-Length, before it is read (a 413 through
    the API's error handler); a route whose bodies are small says so here."""
    declared = declared_length(request)
    if declared > limit:
        raise RequestDataTooBig(f"The body is {declared:,} bytes; {what} is at most {limit:,} bytes. Nothing was read.")
