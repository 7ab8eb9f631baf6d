from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import ADJUDICATOR, has_role, is_admin


def roles(request: HttpRequest) -> dict:
    """`is_admin` and `is_adjudicator` (the role, or an admin) for the navigation and pages, computed only if a
    template asks."""
    return {
        "is_admin": SimpleLazyObject(lambda: is_admin(request.user)),
        "is_adjudicator": SimpleLazyObject(lambda: is_admin(request.user) or has_role(request.user, ADJUDICATOR)),
    }
