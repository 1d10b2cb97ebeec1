"""One way to page every list of the API: a cursor on the row id.

A list answers `{"next": url | null, "previous": url | null, "results": [...]}` (the workers
list adds its `queues` summary beside them): at most `page_size` rows (default PAGE_SIZE,
at most MAX_PAGE_SIZE), newest first by id (campaign judgements oldest first, the order
they were made). Follow `next` until it is null. The cursor holds the id the page ended
at, so rows created while a client pages through never make a page skip or repeat a row.

A page_size out of range, a cursor the API did not write, or a `page` number (lists have
no page numbers: a script counting pages would read the first page forever) is a 400
naming the parameter. Nothing is capped silently. docs/api.md, "Lists and pagination".
"""

from __future__ import annotations

import re
from base64 import b64decode
from binascii import Error as Base64Error
from collections.abc import Callable
from urllib import parse

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.response import Response

from core.ids import parse_id

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200  # the old silent cap of the runs and datasets lists, now asked for explicitly
_PAGE_SIZE_TEXT = re.compile(r"[0-9]{1,4}")


def _refuse(param: str, message: str):
    return ValidationError({param: [message]})


class ListPage(CursorPagination):
    """Newest first by id."""

    ordering = "-id"
    page_size = PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    template = None

    def paginate_queryset(self, queryset, request, view=None):
        if "page" in request.query_params:
            raise _refuse("page", "Lists have no page numbers: follow the `next` link of each page.")
        return super().paginate_queryset(queryset, request, view)

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param, "")
        if raw == "":
            return self.page_size
        if not _PAGE_SIZE_TEXT.fullmatch(raw) or not 1 <= int(raw) <= self.max_page_size:
            raise _refuse(
                self.page_size_query_param, f"A whole number from 1 to {self.max_page_size}; got {raw[:20]!r}."
            )
        return int(raw)

    def decode_cursor(self, request) -> Cursor | None:
        # Only what get_next_link and get_previous_link write: an id (`p`) and a direction (`r`).
        # DRF's own decoding skips characters that are not base64 and answers a bad cursor 404.
        raw = request.query_params.get(self.cursor_query_param, "")
        if raw == "":
            return None
        try:
            text = b64decode(raw.encode("ascii"), validate=True).decode("ascii")
            tokens = parse.parse_qs(text, strict_parsing=True)
        except (UnicodeError, Base64Error, ValueError):
            tokens = {}
        position = parse_id(tokens.get("p", [""])[0])
        reverse = tokens.get("r", ["0"])[0]
        if position is None or reverse not in ("0", "1") or set(tokens) - {"p", "r"}:
            raise _refuse(
                self.cursor_query_param,
                "Not a cursor of this list: use the `next` or `previous` link of a page as it is.",
            )
        return Cursor(offset=0, reverse=reverse == "1", position=str(position))

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {**super().get_paginated_response_schema(schema), "required": ["next", "previous", "results"]}

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "schema": {"type": "string"},
                "description": "Where the page starts: take it from a page's `next` or `previous` link.",
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size, "default": self.page_size},
                "description": f"Rows per page, 1 to {self.max_page_size} (default {self.page_size}); "
                "a larger value is refused (400).",
            },
        ]


class OldestFirstListPage(ListPage):
    """Oldest first by id: the order the rows were made."""

    ordering = "id"


def list_page(view, rows: QuerySet, serialize: Callable[[list], list], **extra) -> Response:
    """One page of `rows` in the order of the view's `pagination_class`, serialized, with the
    links to the pages beside and `extra` keys after them."""
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(rows, view.request, view)
    response = paginator.get_paginated_response(serialize(page))
    response.data.update(extra)
    return response


def page_parameters() -> list:
    """The paging parameters for the schema of a view whose answer holds more than the page
    (the workers list), which drf-spectacular does not take for a list."""
    from drf_spectacular.utils import OpenApiParameter

    return [
        OpenApiParameter(p["name"], p["schema"], description=p["description"])
        for p in ListPage().get_schema_operation_parameters(None)
    ]
