"""Who may see which runs, and whether a run's failure-signature hits may reach someone's eyes now.

This app's pages (run list, run page, its files, the API, the CSV exports) ask here; they do not decide.
Who codes a run, who leads a study of it and what its hint policy allows is the annotation app's
business: that app gives its rule to `rule_install` when Django starts (annotation/apps.py), as
`annotation.access.RUN_ACCESS`. Without it — this app on its own — admins and adjudicators browse every
run and see its hits, and nobody else sees any.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from accounts.roles import ADJUDICATOR, has_role, is_admin

from .models import Run

AnyUser = AbstractBaseUser | AnonymousUser  # signed in or not

# What `hint_access` answers.
HINTS_HIDDEN = "hidden"  # nothing about hits may be shown, not even a count
HINTS_TO_REVEAL = "reveal"  # allowed, but an annotator sees them on their coding page first (where it is recorded)
HINTS_SHOWN = "shown"


def can_browse_all_runs(user: AnyUser) -> bool:
    return is_admin(user) or has_role(user, ADJUDICATOR)


@dataclass(frozen=True)
class RunAccess:
    """A rule: `visible_runs(user, runs)` narrows `runs` to those `user` may see (a queryset, so that the
    pages still filter, page and count in SQL); `hint_access(user, run)` says whether `user` may see the
    hits of `run` (or its twin) now: HINTS_HIDDEN, HINTS_TO_REVEAL or HINTS_SHOWN."""

    visible_runs: Callable[[AnyUser, QuerySet[Run]], QuerySet[Run]]
    hint_access: Callable[[AnyUser, Run], str]


def _browsers_only(user: AnyUser, runs: QuerySet[Run]) -> QuerySet[Run]:
    return runs if user.is_authenticated and can_browse_all_runs(user) else runs.none()


def _browsers_see_hints(user: AnyUser, run: Run) -> str:
    return HINTS_SHOWN if user.is_authenticated and can_browse_all_runs(user) else HINTS_HIDDEN


BROWSERS_ONLY = RunAccess(visible_runs=_browsers_only, hint_access=_browsers_see_hints)
_rule = BROWSERS_ONLY


def rule_install(rule: RunAccess) -> None:
    """The rule every page of this app asks from now on (the annotation app's, once it is ready)."""
    global _rule
    _rule = rule


def visible_runs(user: AnyUser, runs: QuerySet[Run]) -> QuerySet[Run]:
    return _rule.visible_runs(user, runs)


def hint_access(user: AnyUser, run: Run) -> str:
    return _rule.hint_access(user, run)
