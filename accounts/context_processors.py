from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import is_admin


def roles(request: HttpRequest) -> dict:
    """`is_admin` for the navigation and pages, computed only if a template asks."""
    return {"is_admin": SimpleLazyObject(lambda: is_admin(request.user))}
