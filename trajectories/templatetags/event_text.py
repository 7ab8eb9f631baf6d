"""An event's text as the page shows it in a <pre>, character for character: the HTML parser turns a carriage
return into a line feed (and drops the line feed after "<pre>", which events.html writes for that reason), so a
carriage return is written as a character reference, which the parser keeps. The page's text is then the event's
text exactly, and a selection in it is counted in the event's characters (a cited span: docs/annotation.md).
`cite_anchor` is the evidence anchor its "cite" button writes: selectors.event_anchor's text, not a copy of it."""

from __future__ import annotations

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from ..models import AgentContext, Event
from ..selectors import event_anchor

register = template.Library()


@register.filter
def exact_text(value: str) -> SafeString:
    return mark_safe(conditional_escape(value).replace("\r", "&#13;"))  # escaped first


@register.filter
def cite_anchor(event: Event, context: AgentContext) -> str:
    """The anchor of `event`, read from a line of `context`'s log (or of the file the event names)."""
    return event_anchor(run=context.run, source_file=event.source_file or context.source_file, line=event.source_line)
