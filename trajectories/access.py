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


# -- hints: who may see a run's failure-signature hits (docs/signatures.md, docs/annotation.md) ----

# When a study shows the hits to its annotators (Study.hint_policy): the vocabulary lives here, beside
# the rule that reads it, because the run page (this app) applies it too.
HINT_NEVER = "never"
HINT_AFTER_FIRST_SUBMISSION = "after_first_submission"
HINT_ALWAYS = "always"
HINT_POLICIES = {
    HINT_NEVER: "never",
    HINT_AFTER_FIRST_SUBMISSION: "after the annotator's first submission of the run",
    HINT_ALWAYS: "always",
}
DEFAULT_HINT_POLICY = HINT_AFTER_FIRST_SUBMISSION

HINTS_HIDDEN = "hidden"  # nothing about hits may be shown, not even a count
HINTS_TO_REVEAL = "reveal"  # allowed, but an annotator sees them on their coding page first (where it is recorded)
HINTS_SHOWN = "shown"


def hints_allowed(policy: str, *, submitted: bool) -> bool:
    """Does a study with this policy show hits to an annotator who has (not) submitted the run yet?"""
    return policy == HINT_ALWAYS or (policy == HINT_AFTER_FIRST_SUBMISSION and submitted)


def hint_access(user: AbstractBaseUser | AnonymousUser, run: Run) -> str:
    """Whether `user` may see the hits of `run` (or its twin) now: HINTS_HIDDEN, HINTS_TO_REVEAL or
    HINTS_SHOWN. Whoever codes the pair in a study is an annotator here, whatever their roles: every
    study in which they are assigned the run or its twin must allow it now (policy and their own
    submission), and once allowed they see hits on their coding page first, where it is recorded;
    pages elsewhere show them once every such coding has recorded them. Otherwise admins, adjudicators
    and the adjudicator of a study of the pair see them; anyone else (a pilot round's coder) does not.
    One or two queries."""
    if not user.is_authenticated:
        return HINTS_HIDDEN
    pair = Run.objects.filter(task_id=run.task_id, agent_id=run.agent_id)
    codings = list(
        pair.filter(assignments__annotator=user).values_list(
            "assignments__study__hint_policy",
            "assignments__annotation__submitted_at",
            "assignments__annotation__hints_seen_at",
        )
    )
    if codings:
        if not all(hints_allowed(policy, submitted=submitted is not None) for policy, submitted, _ in codings):
            return HINTS_HIDDEN
        return HINTS_SHOWN if all(seen is not None for _, _, seen in codings) else HINTS_TO_REVEAL
    if can_browse_all_runs(user) or pair.filter(studies__adjudicator=user).exists():
        return HINTS_SHOWN
    return HINTS_HIDDEN
