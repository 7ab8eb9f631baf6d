"""The hints panel: a run's failure-signature hits with the codebook's names for the modes they
support, and what a person may see of them (`annotation.access.hint_access` is the rule)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from taxonomy.models import Code, Codebook
from trajectories.access import HINTS_HIDDEN, HINTS_SHOWN
from trajectories.models import Run
from trajectories.selectors import run_hints, signatures_outdated

from ..access import hint_access
from ..hint_policies import HINT_NEVER
from ..models import Annotation, Assignment, Study


def hint_rows(*, run: Run, codebook: Codebook) -> list[dict]:
    """The run's hits in order: {hit, modes: [(key, name)], evidence} — a mode key the codebook does
    not have keeps its key as its name. Three queries."""
    rows = run_hints(run=run)
    keys = {key for row in rows for key in row["hit"].modes}
    names = dict(Code.objects.filter(codebook=codebook, key__in=keys).values_list("key", "name")) if keys else {}
    for row in rows:
        row["modes"] = [(key, names.get(key, key)) for key in row["hit"].modes]
    return rows


def coding_hints(*, user: AbstractBaseUser, assignment: Assignment, annotation: Annotation) -> dict:
    """The coding page's panel, as {state, rows}:
    "off" (the study never shows hints: no panel), "waiting" (shown after the first submission, not
    made yet: the panel says so and nothing about hits), "elsewhere" (another study in which this
    annotator codes the pair does not show them yet), "offer" (allowed, not shown yet: a button that
    shows and records them), "shown" (recorded: the hits, each event with a "cite"; `outdated` says when
    older rules found them)."""
    study: Study = assignment.study
    run = assignment.run
    if study.hint_policy == HINT_NEVER:
        return {"state": "off", "rows": [], "run": run}
    if not study.shows_hints(submitted=annotation.submitted_at is not None):
        return {"state": "waiting", "rows": [], "run": run}
    if hint_access(user, run) == HINTS_HIDDEN:
        return {"state": "elsewhere", "rows": [], "run": run}
    if annotation.hints_seen_at is None:
        return {"state": "offer", "rows": [], "run": run}
    rows = hint_rows(run=run, codebook=study.codebook)
    return {"state": "shown", "rows": rows, "run": run, "note": _note(run), "outdated": signatures_outdated(run)}


def review_hints(*, user: AbstractBaseUser | AnonymousUser, run: Run, codebook: Codebook) -> dict:
    """The discussion and adjudication pages' panel (no "cite": nothing is coded there): the hits for
    the study's adjudicator and admins; for an annotator as on the run page ("reveal": shown on their
    coding page first)."""
    access = hint_access(user, run)
    rows = hint_rows(run=run, codebook=codebook) if access == HINTS_SHOWN else []
    return {"state": access, "rows": rows, "run": run, "note": _note(run), "outdated": signatures_outdated(run)}


def _note(run: Run) -> str:
    """Why a run has no hits (as the run page says it)."""
    if run.signatures_version is None:
        return "Not checked yet (manage.py detect_signatures)."
    return run.signatures_note or "No signature found in this run."
