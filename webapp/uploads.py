"""The upload size limit, enforced while the body arrives rather than after it is stored.

An upload that declares more than IMPORT_MAX_UPLOAD_BYTES is refused from its
Content-Length before a byte of it is read, and a body that grows past the limit (a
length that lied) stops being read at the limit. Both raise `RequestDataTooBig`, which the
API answers with a 413 and a page with a 400.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler

# Multipart framing (boundaries, headers, the other form fields) on top of the file itself.
MULTIPART_ALLOWANCE = 64 * 1024


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
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise RequestDataTooBig(f"The body is {declared:,} bytes; {what} is at most {limit:,} bytes. Nothing was read.")
