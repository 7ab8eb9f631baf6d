"""The request type of every view: Django's, with django-htmx's `request.htmx` (its middleware
sets it on every request), so that type checkers know the attribute."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
