"""The three roles of a study, as Django groups (created by a data migration)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

ANNOTATOR = "annotator"
ADJUDICATOR = "adjudicator"  # the senior author
ADMIN = "admin"
ALL_ROLES = (ANNOTATOR, ADJUDICATOR, ADMIN)


def role_names(user: AbstractBaseUser | AnonymousUser) -> frozenset[str]:
    """The user's role groups, read once per user object (i.e. once per request)."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_parallax_roles", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True))
        user._parallax_roles = cached
    return cached


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    if not user.is_authenticated:
        return False
    return user.is_superuser or role in role_names(user)


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Admins (the role, or Django staff): they import trajectories, edit codebooks, consolidate
    pilot codes and see every study's dashboard."""
    return user.is_authenticated and (user.is_staff or has_role(user, ADMIN))
