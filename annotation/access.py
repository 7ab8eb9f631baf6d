"""Who may see what: the blinding rule for another coder's work (`blind_to_pair`, `not_blind`: discussions, their
list, a run's history, the adjudication pages), a study's summary of everyone's work (`lead_study`), and the
rule the trajectories app asks through `trajectories.access` for its pages — which runs a person may see
(`visible_runs`) and whether a run's failure-signature hits may reach their eyes now (`hint_access`), installed
as `RUN_ACCESS` when this app is ready (apps.py)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.shortcuts import get_object_or_404

from accounts.roles import is_admin
from trajectories.access import HINTS_HIDDEN, HINTS_SHOWN, HINTS_TO_REVEAL, RunAccess, can_browse_all_runs
from trajectories.models import Run

from .hint_policies import hints_allowed
from .models import Annotation, Assignment, Study


def may_adjudicate(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Admins, adjudicators, and anyone a study names as its adjudicator."""
    return can_browse_all_runs(user) or Study.objects.filter(adjudicator_id=user.pk).exists()


def lead_study(user: AbstractBaseUser, study_id: int) -> Study:
    """A study's dashboard pages and API are for its senior adjudicator and admins: 404 for a missing
    study, 403 for anyone else."""
    study = get_object_or_404(Study.objects.select_related("codebook", "adjudicator"), pk=study_id)
    if user.pk != study.adjudicator_id and not is_admin(user):
        raise PermissionDenied("Dashboards are for the study's adjudicator and admins.")
    return study


# -- blinding: one rule for everything that shows another coder's work --------------------------------------


def unsubmitted_codings(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Assignment]:
    """The runs `user` is to code and has not submitted, in any study (whatever their roles)."""
    return Assignment.objects.filter(annotator_id=user.pk).exclude(annotation__status=Annotation.Status.SUBMITTED)


def blind_to_pair(user: AbstractBaseUser | AnonymousUser, run: Run) -> bool:
    """THE blinding rule: another coder's work on a run (their coding, its history, the discussion of it, its
    ruling) stays hidden from `user` until they have submitted that run — or its twin — in every study where
    they code it. Anyone else (an adjudicator, an admin, a coder of other runs) is not blind to it; whether
    they may see it at all is the page's own rule. One query."""
    return unsubmitted_codings(user).filter(run__task_id=run.task_id, run__agent_id=run.agent_id).exists()


def not_blind(user: AbstractBaseUser | AnonymousUser, rows: QuerySet, *, run: str = "run") -> QuerySet:
    """`rows` (whose run is at the path `run`) without those `blind_to_pair` hides from `user`: one EXISTS."""
    hidden = unsubmitted_codings(user).filter(
        run__task_id=OuterRef(f"{run}__task_id"), run__agent_id=OuterRef(f"{run}__agent_id")
    )
    return rows.exclude(Exists(hidden))


def visible_runs(user: AbstractBaseUser | AnonymousUser, runs: QuerySet[Run]) -> QuerySet[Run]:
    """Admins and adjudicators browse the whole corpus. Anyone else sees only the runs they were given
    to code (in a study or a pilot round) and those runs' twins."""
    if not user.is_authenticated:
        return runs.none()
    if can_browse_all_runs(user):
        return runs
    # One EXISTS over the pair with both ways in OR-ed inside it: PostgreSQL runs it as a hash semi-join on
    # (task, agent). An EXISTS per table OR-ed outside doubled the annotator's run list on PostgreSQL
    # (53 ms, not 25, with 1,416 of 2,124 runs visible: a costlier plan estimate, so JIT compilation too).
    mine = Run.objects.filter(Q(assignments__annotator=user) | Q(pilot_rounds__annotators=user))
    return runs.filter(Exists(mine.filter(task_id=OuterRef("task_id"), agent_id=OuterRef("agent_id"))))


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
    codings = list(
        Assignment.objects.filter(annotator=user, run__task_id=run.task_id, run__agent_id=run.agent_id).values_list(
            "study__hint_policy", "annotation__submitted_at", "annotation__hints_seen_at"
        )
    )
    if codings:
        if not all(hints_allowed(policy, submitted=submitted is not None) for policy, submitted, _ in codings):
            return HINTS_HIDDEN
        return HINTS_SHOWN if all(seen is not None for _, _, seen in codings) else HINTS_TO_REVEAL
    if can_browse_all_runs(user):
        return HINTS_SHOWN
    leads = Study.objects.filter(adjudicator=user, runs__task_id=run.task_id, runs__agent_id=run.agent_id)
    return HINTS_SHOWN if leads.exists() else HINTS_HIDDEN


RUN_ACCESS = RunAccess(visible_runs=visible_runs, hint_access=hint_access)
