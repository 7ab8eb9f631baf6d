from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import ADJUDICATOR, ANNOTATOR, has_role, is_admin


def roles(request: HttpRequest) -> dict:
    """What the navigation and pages ask of the user's roles, computed only if a template asks (the roles are read
    once per request): `is_admin`, `codes` (an annotator: their queue), `leads` (an adjudicator or an admin: the
    adjudication queue and the studies)."""
    # read when a template asks: a request refused before authentication (a 400) has no user
    return {
        "is_admin": SimpleLazyObject(lambda: is_admin(request.user)),
        "codes": SimpleLazyObject(lambda: has_role(request.user, ANNOTATOR)),
        "leads": SimpleLazyObject(lambda: is_admin(request.user) or has_role(request.user, ADJUDICATOR)),
    }
