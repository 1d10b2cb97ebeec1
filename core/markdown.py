"""Markdown as people write it (campaign guidelines, notes) to HTML that is safe to show: CommonMark
with GitHub's tables, then sanitized (no script, no event handlers, no javascript: links). The
templates' `markdown_safe` filter and the stored guidelines both use it."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

# CommonMark, as GitHub and most editors write it (a list right after a paragraph or another
# kind of list starts a list of its own), with GitHub's tables.
_MARKDOWN = MarkdownIt("commonmark").enable("table")

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "b",
    "i",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


def markdown_html(text: str | None) -> str:
    """`text` rendered and sanitized ("" for none)."""
    html = _MARKDOWN.render(text or "")
    return nh3.clean(
        html, tags=ALLOWED_TAGS, attributes={"a": {"href", "title"}}, url_schemes={"http", "https", "mailto"}
    )
