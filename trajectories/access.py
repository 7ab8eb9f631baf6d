"""Who may see which runs.

Admins and adjudicators browse the whole corpus. Anyone else sees only the runs they were
given to code (in a study or a pilot round) and those runs' twins. The rule is written with
the reverse relations' names, so this app still imports nothing from the annotation app.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet

from accounts.roles import ADJUDICATOR, has_role, is_admin

from .models import Run


def can_browse_all_runs(user: AbstractBaseUser | AnonymousUser) -> bool:
    return is_admin(user) or has_role(user, ADJUDICATOR)


def visible_runs(user: AbstractBaseUser | AnonymousUser, runs: QuerySet[Run]) -> QuerySet[Run]:
    if not user.is_authenticated:
        return runs.none()
    if can_browse_all_runs(user):
        return runs
    mine = Run.objects.filter(Q(assignments__annotator=user) | Q(pilot_rounds__annotators=user))
    return runs.filter(Exists(mine.filter(task_id=OuterRef("task_id"), agent_id=OuterRef("agent_id"))))
