from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import can_import


def roles(request: HttpRequest) -> dict:
    """`can_import` for the navigation, computed only if a template asks."""
    return {"can_import": SimpleLazyObject(lambda: can_import(request.user))}
