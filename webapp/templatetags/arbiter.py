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


@register.filter
def percent(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


@register.filter
def number(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
