"""Template helpers: safe Markdown, and small formatting filters."""
import markdown as md
import nh3
from django import template
from django.utils.safestring import mark_safe

register = template.Library()

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown to HTML, then sanitized: no script, no event handlers, no javascript: links."""
    html = md.markdown(text or "", extensions=["tables", "fenced_code"])
    return mark_safe(nh3.clean(html, tags=ALLOWED_TAGS, attributes={"a": {"href", "title"}},
                               url_schemes={"http", "https", "mailto"}))


def _is_number(value) -> bool:
    """Missing figures (None, or "" for a key a template could not find) print as a dash."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@register.filter
def percent(value) -> str:
    return f"{100 * value:.1f}%" if _is_number(value) else "–"


@register.filter
def number(value, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if _is_number(value) else "–"
