"""The three roles of a study, as Django groups (created by a data migration)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

ANNOTATOR = "annotator"
ADJUDICATOR = "adjudicator"  # the senior author
ADMIN = "admin"
ALL_ROLES = (ANNOTATOR, ADJUDICATOR, ADMIN)


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name=role).exists()


def can_import(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Importing trajectories changes the corpus every study reads: admins only."""
    return user.is_authenticated and (user.is_staff or has_role(user, ADMIN))
