"""An annotator's pages: the queue, the annotate page (the pair beside the code picker) and its
autosave, submit and revise targets."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from common.htmx import HtmxHttpRequest
from common.keyset import CursorError
from common.responses import invalid_parameter
from trajectories.selectors import pair_sides

from ..errors import AnnotationError, ConflictError, LockedError
from ..forms import parse_annotation_form
from ..models import Assignment, Discussion, Study
from ..selectors import queue as selectors
from ..selectors.hints import coding_hints
from ..services.coding import anchor_problems, annotation_revise, annotation_save, annotation_skip, annotation_submit
from ..services.hints import HintsHiddenError, annotation_hints_show


def _own(request: HtmxHttpRequest, assignment_id: int) -> Assignment:
    assignment = selectors.own_assignment(user=request.user, assignment_id=assignment_id)
    if assignment is None:
        raise Http404("No such assignment of yours.")
    return assignment


@require_GET
def queue(request: HtmxHttpRequest) -> HttpResponse:
    """The annotator's queue: progress per study, then one page of one study's runs (queue order)."""
    progress = selectors.queue_progress(user=request.user)
    nxt = selectors.next_assignment(user=request.user)
    studies = {str(p["study_id"]): p for p in progress}
    chosen = request.GET.get("study") or (str(nxt.study_id) if nxt else next(iter(studies), None))
    show = request.GET.get("show", "todo")
    if chosen is not None and chosen not in studies:
        return invalid_parameter(
            request, f"'study' must be one of your studies ({', '.join(studies)}), got {chosen[:40]!r}"
        )
    if show not in selectors.QUEUE_SHOWS:
        return invalid_parameter(
            request, f"'show' must be one of {', '.join(selectors.QUEUE_SHOWS)}, got {show[:40]!r}"
        )
    page = None
    if chosen is not None:
        study = Study(pk=int(chosen), name=studies[chosen]["study__name"])
        try:
            page = selectors.queue_page(user=request.user, study=study, show=show, params=request.GET)
        except CursorError as exc:
            return invalid_parameter(request, str(exc))
    context = {
        "progress": progress,
        "current": studies.get(chosen),
        "show": show,
        "shows": [(key, label) for key, (label, _) in selectors.QUEUE_SHOWS.items()],
        "page": page,
        "next": nxt,
    }
    return render(request, "annotation/queue.html", context)


@require_GET
def next_run(request: HtmxHttpRequest) -> HttpResponse:
    assignment = selectors.next_assignment(user=request.user)
    if assignment is None:
        return redirect("annotation:queue")
    return redirect("annotation:annotate", assignment_id=assignment.pk)


@require_GET
@never_cache  # the back button must show the coding as it is now (submitted), not a stale editable form
def annotate(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)
    labels: dict[int, list] = {}
    for label in annotation.labels.all() if annotation.pk else []:
        labels.setdefault(label.code_id, []).append(label)
    tree = selectors.picker_tree(study=assignment.study)
    modes = [mode for category in tree for sub in category.children for mode in sub.children]
    discussion = Discussion.objects.filter(study=assignment.study, run=assignment.run).first()
    revising = annotation.is_submitted and discussion is not None and discussion.status == Discussion.Status.OPEN
    context = {
        "assignment": assignment,
        "annotation": annotation,
        "tree": tree,
        "labels": labels,
        "discussion": discussion,
        "revising": revising,
        # the status line: has this coding been revised since it was submitted?
        "revised": revising and annotation.history.filter(action="revise").exists(),
        "editable": not annotation.is_submitted or revising,
        "save_url": reverse("annotation:revise" if revising else "annotation:save", args=[assignment.pk]),
        # The coded modes' cards, each with its instances (episodes); a mode picked on the page gets its card from
        # the page's one blank card (#card-template, fields named for mode 0).
        "cards": [(node.code, _instances(labels[node.code.pk])) for node in modes if node.code.pk in labels],
        "blank_code": {"pk": 0},
        "blank_instances": _instances([None]),
        "all_codes": [node.code for node in modes],
        "position": selectors.queue_position(user=request.user, assignment=assignment),
        "hints": coding_hints(user=request.user, assignment=assignment, annotation=annotation),
        **pair_sides(assignment.run),
    }
    return render(request, "annotation/annotate.html", context)


def _instances(labels: list) -> list[tuple[int, str, object]]:
    """(instance number, form-field suffix, label) for one mode's card."""
    return [(k, "" if k == 1 else f"-{k}", label) for k, label in enumerate(labels, start=1)]


def _status(
    request: HtmxHttpRequest,
    annotation,
    *,
    error: str | Exception = "",
    refused: str = "Not saved.",
    warnings: list[str] | None = None,
    status: int = 200,
    saved: bool = False,
    discussion: Discussion | None = None,
) -> HttpResponse:
    conflict = status == 409 and isinstance(error, ConflictError)
    revising = discussion is not None and discussion.status == Discussion.Status.OPEN and annotation.is_submitted
    context = {
        "annotation": annotation,
        "discussion": discussion,
        "revising": revising,
        "revised": revising and not error,  # a revision that went through
        "error": str(error),
        "refused": refused,
        "warnings": warnings or [],
        "conflict": conflict,
        "saved_labels": annotation.labels.select_related("code") if conflict else [],
        "oob": True,
        # Only a save that went through moves the page to the new version: after any refusal the
        # page keeps the version it last saved, so a later save cannot overwrite another tab's.
        "send_version": saved or not error,
    }
    return render(request, "annotation/partials/save_status.html", context, status=status)


def _apply(
    request: HtmxHttpRequest,
    annotation,
    write,
    *,
    refused: str = "Not saved.",
    saved: bool = False,
    discussion: Discussion | None = None,
) -> HttpResponse | None:
    """Parse the annotate form and run `write(form)`; a refusal becomes the status fragment
    (409 for a stale version or a locked annotation, 422 for invalid input)."""
    try:
        write(parse_annotation_form(request.POST))
    except (ConflictError, LockedError) as exc:
        _reload(annotation)
        return _status(request, annotation, error=exc, refused=refused, status=409, saved=saved, discussion=discussion)
    except AnnotationError as exc:
        _reload(annotation)
        return _status(
            request, annotation, error=str(exc), refused=refused, status=422, saved=saved, discussion=discussion
        )
    return None


def _reload(annotation) -> None:
    if annotation.pk is not None:  # an unsaved draft has nothing to reload
        annotation.refresh_from_db()


def _saved(
    request: HtmxHttpRequest, assignment: Assignment, annotation, discussion: Discussion | None = None
) -> HttpResponse:
    """Saved; anchors that do not resolve are said now (the coding keeps them, and submitting
    refuses them until they are fixed)."""
    if not request.htmx:
        return redirect("annotation:annotate", assignment_id=assignment.pk)
    labels = annotation.labels.all() if annotation.pk else []
    problems = anchor_problems(run=assignment.run, labels=labels)
    warnings = [m for messages in problems.values() for m in messages]
    return _status(request, annotation, warnings=warnings, discussion=discussion)


@require_POST
def save(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)

    def write(form):
        annotation_save(annotation=annotation, actor=request.user, **form)

    return _apply(request, annotation, write) or _saved(request, assignment, annotation)


@require_POST
def submit(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)

    def write(form):
        # Submitting saves what is on the screen first, then locks it.
        annotation_save(annotation=annotation, actor=request.user, **form)

    def lock(_form):
        annotation_submit(annotation=annotation, actor=request.user, version=annotation.version)

    # What is on the screen stays saved when locking is refused (a missing rationale, an anchor
    # that cites no file of the pair): the status says so.
    refusal = _apply(request, annotation, write) or _apply(
        request, annotation, lock, refused="Saved, not submitted.", saved=True
    )
    if refusal:
        return refusal
    run = assignment.run
    messages.success(request, f"Submitted {run.task.external_id} ({run.agent.name}, run #{run.pk}).")
    return _to_next(request)


def _to_next(request: HtmxHttpRequest) -> HttpResponse:
    target = reverse("annotation:next")
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@require_POST
def skip(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    """Set the run aside (with a reason) and go on to the next one; what is typed stays saved."""
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)
    try:
        annotation_skip(annotation=annotation, actor=request.user, reason=request.POST.get("reason", ""))
    except (LockedError, AnnotationError) as exc:
        _reload(annotation)
        return _status(request, annotation, error=exc, refused="Not skipped.", status=422)
    run = assignment.run
    messages.info(request, f"Skipped {run.task.external_id} ({run.agent.name}): it waits at the end of your queue.")
    return _to_next(request)


@require_POST
def revise(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    """Autosave target while the run is under discussion: revises the submitted coding."""
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)
    discussion = Discussion.objects.filter(study=assignment.study, run=assignment.run).first()
    if discussion is None:
        return _status(request, annotation, error="this run is not under discussion", status=409)

    def write(form):
        annotation_revise(discussion=discussion, annotation=annotation, actor=request.user, **form)

    return _apply(request, annotation, write, discussion=discussion) or _saved(
        request, assignment, annotation, discussion
    )


@require_POST
def hints(request: HtmxHttpRequest, assignment_id: int) -> HttpResponse:
    """Show the hints of the run being coded (and record it the first time): the panel in place, or
    the page again. 403 while the study (or another study of this annotator's on the pair) hides them."""
    assignment = _own(request, assignment_id)
    annotation = selectors.annotation_for(assignment=assignment)
    try:
        annotation_hints_show(annotation=annotation, actor=request.user)
    except HintsHiddenError as exc:
        raise PermissionDenied(str(exc)) from exc
    if not request.htmx:
        return redirect(reverse("annotation:annotate", args=[assignment.pk]) + "#hints")
    # "cite" where the page can take it: a draft, or a revision during the run's open discussion
    discussion = Discussion.objects.filter(study=assignment.study, run=assignment.run).first()
    revising = discussion is not None and discussion.status == Discussion.Status.OPEN
    context = {
        "assignment": assignment,
        "hints": coding_hints(user=request.user, assignment=assignment, annotation=annotation),
        "citable": not annotation.is_submitted or revising,
    }
    return render(request, "annotation/partials/hints.html", context)
