from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from accounts.roles import is_admin
from common.htmx import HtmxHttpRequest
from common.keyset import CursorError, keyset_page
from common.responses import invalid_parameter

from . import selectors, services, tasks
from .access import HINTS_SHOWN, hint_access, visible_runs
from .artifacts import AnchorError
from .exports import METRICS_COLUMNS, TEST_COLUMNS, by_pk, csv_lines, metrics_rows, test_rows
from .formats.records import EVENT_KINDS, FormatError
from .forms import UploadForm
from .models import AgentContext, ImportBatch, Run, RunFile
from .timeline import LaneInput, build_timeline

RUNS_PER_PAGE = 50
EVENTS_PER_PAGE = 100


@require_GET
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    filters = selectors.run_filters(request.GET)
    runs = visible_runs(request.user, selectors.run_list(filters=filters))
    try:
        page = keyset_page(runs, order=selectors.RUN_LIST_ORDER, params=request.GET, size=RUNS_PER_PAGE)
    except CursorError as exc:
        return invalid_parameter(request, str(exc))
    page.extra["total"] = runs.count()
    query = request.GET.copy()  # the filters, for the export link
    for cursor in ("after", "before"):
        query.pop(cursor, None)
    context = {"page": page, "filters": filters, "choices": selectors.filter_choices(), "query": query.urlencode()}
    template = "trajectories/run_list.html#run-table" if request.htmx else "trajectories/run_list.html"
    return render(request, template, context)


CONTEXTS_PER_PAGE = 100


def _visible_run(request: HtmxHttpRequest, run_id: int) -> Run:
    return get_object_or_404(visible_runs(request.user, Run.objects.all()), pk=run_id)


@require_GET
def run_timeline(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    timeline = build_timeline(
        [
            LaneInput(
                id=c.pk,
                label=_lane_name(c),
                role=c.role,
                depth=c.depth,
                status=c.status,
                started_at=c.started_at,
                ended_at=c.ended_at,
                full_label=c.label or c.external_id,
            )
            for c in selectors.run_lanes(run=run)
        ]
    )
    return render(request, "trajectories/partials/timeline.html", {"run": run, "timeline": timeline})


def _lane_name(context: AgentContext) -> str:
    """What a lane is called beside its bar: a workflow agent by its slot and attempt (its whole
    label, workflow / phase / slot, is the lane's title), any other agent by its label."""
    if context.slot:
        return f"{context.slot} {context.attempt}/{context.attempts}" if context.retried else context.slot
    return context.label or context.external_id


@require_GET
def run_contexts(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    try:
        offset = _offset(request)
    except _OffsetError as exc:
        return invalid_parameter(request, str(exc))
    page = selectors.run_contexts(run=run, offset=offset, limit=CONTEXTS_PER_PAGE)
    return render(
        request,
        "trajectories/partials/contexts.html",
        {
            "run": run,
            "contexts": page[:CONTEXTS_PER_PAGE],
            "has_more": len(page) > CONTEXTS_PER_PAGE,
            "next_offset": offset + CONTEXTS_PER_PAGE,
        },
    )


MAX_OFFSET = 2**31 - 1  # far beyond any run's events; PostgreSQL's OFFSET stops at 2**63 - 1


class _OffsetError(ValueError):
    pass


def _offset(request: HtmxHttpRequest) -> int:
    """`?offset=`: a whole number of rows to pass over, 0 when absent; anything else is a 400."""
    raw = request.GET.get("offset", "") or "0"
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_OFFSET:
        raise _OffsetError(f"'offset' must be a whole number from 0 to {MAX_OFFSET:,}, got {raw[:40]!r}")
    return int(raw)


@require_GET
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(
        visible_runs(request.user, Run.objects.select_related("task__benchmark", "agent")), pk=run_id
    )
    context = selectors.pair_sides(run)
    # Hits are hints: an annotator sees them only when every study they code the pair in allows it,
    # and first on their coding page (where it is recorded); before that nothing says whether there are any.
    context["hints"] = hint_access(request.user, run)
    if context["hints"] == HINTS_SHOWN:
        context["signatures"] = selectors.run_signature_rows(runs=[row["run"] for row in context["pair_rows"]])
    return render(request, "trajectories/run_detail.html", context)


@require_GET
def context_events(request: HtmxHttpRequest, run_id: int, context_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    ctx = get_object_or_404(AgentContext.objects.select_related("run"), pk=context_id, run=run)
    try:
        offset = _offset(request)
    except _OffsetError as exc:
        return invalid_parameter(request, str(exc))
    kinds = [k for k in request.GET.getlist("kind") if k in EVENT_KINDS]
    events = selectors.context_events(context=ctx, offset=offset, limit=EVENTS_PER_PAGE, kinds=kinds)
    has_more = len(events) > EVENTS_PER_PAGE
    events = events[:EVENTS_PER_PAGE]
    targets = selectors.event_targets(run=run, events=events)
    for event in events:
        event.links = targets.get(event.target, [])
    return render(
        request,
        "trajectories/partials/events.html",
        {
            "ctx": ctx,
            "events": events,
            "has_more": has_more,
            "next_offset": offset + EVENTS_PER_PAGE,
            "kinds": kinds,
        },
    )


def _line_param(request: HtmxHttpRequest, name: str) -> int | None:
    try:
        value = int(request.GET.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


@require_GET
def run_file(request: HtmxHttpRequest, run_id: int, file_id: int) -> HttpResponse:
    """One of a run's files, opened at the cited lines: an artifact's text (a patch as a diff),
    or for a log the events read from those lines and the lines themselves."""
    run = get_object_or_404(
        visible_runs(request.user, Run.objects.select_related("task__benchmark", "agent")), pk=run_id
    )
    file = get_object_or_404(RunFile, pk=file_id, run=run)
    start = _line_param(request, "line")
    end = max(start or 0, _line_param(request, "end") or 0) or start
    context = {"run": run, "file": file, "start": start, "end": end}
    if file.kind == RunFile.Kind.LOG:
        context["events"] = selectors.events_at_line(file=file, start=start, end=end) if start else []
        context["mark_missing"] = selectors.mark_span(context["events"], request.GET.get("mark", ""))
        context["raw_lines"] = selectors.log_lines(file=file, start=start, end=end)
        context["cited_json"] = selectors.cited_json(context["raw_lines"])
        context["kept_lines"] = file.content.count("\n") + (bool(file.content) and not file.content.endswith("\n"))
    else:
        context.update(selectors.artifact_digest(file.kind, file.content))
        if file.kind in (RunFile.Kind.EVALUATION, RunFile.Kind.TEST_OUTPUT):
            context.update(selectors.file_tests(file=file))  # read at import (TestOutcome)
        context["lines"] = list(enumerate(file.content.splitlines(), start=1))
    return render(request, "trajectories/run_file.html", context)


@require_GET
def pair_anchor(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Follow an anchor written in a coding of this run's pair (`?a=serial/cell/model.patch:12`;
    `side=contrast` when it was written as contrast, so that a bare path means the twin)."""
    run = _visible_run(request, run_id)
    default_mode = run.twin_mode if request.GET.get("side") == "contrast" else run.mode
    try:
        resolved = selectors.resolve_anchor(run=run, text=request.GET.get("a", ""), default_mode=default_mode)
    except AnchorError as exc:
        return render(request, "trajectories/anchor_missing.html", {"run": run, "error": str(exc)}, status=404)
    if not visible_runs(request.user, Run.objects.filter(pk=resolved.run.pk)).exists():
        raise PermissionDenied("That run is not visible to you.")
    url = resolved.url
    if request.GET.get("mark"):  # a cited span: the file page highlights its characters
        path, _, fragment = url.partition("#")
        url = f"{path}&{urlencode({'mark': request.GET['mark']})}#{fragment}"
    return redirect(url)


@require_GET
def metrics_csv(request: HtmxHttpRequest) -> StreamingHttpResponse:
    filters = selectors.run_filters(request.GET)
    # In run id order, 500 runs per query: the first row comes at once however many runs there are.
    rows = metrics_rows(by_pk(visible_runs(request.user, selectors.run_list(filters=filters))))
    response = StreamingHttpResponse(csv_lines(rows, METRICS_COLUMNS), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="parallax-run-metrics.csv"'
    return response


@require_GET
def tests_csv(request: HtmxHttpRequest) -> StreamingHttpResponse:
    """One row per run × test (each run's test list), for the runs the run list's filters pick."""
    filters = selectors.run_filters(request.GET)
    rows = test_rows(visible_runs(request.user, selectors.run_list(filters=filters)))
    response = StreamingHttpResponse(csv_lines(rows, TEST_COLUMNS), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="parallax-run-tests.csv"'
    return response


BATCHES_PER_PAGE = 20


@require_http_methods(["GET", "POST"])
def import_upload(request: HtmxHttpRequest) -> HttpResponse:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins can import trajectories.")
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            batch = services.import_batch_create(
                upload=form.cleaned_data["file"], user=request.user, fmt=form.cleaned_data["format"]
            )
        except FormatError as exc:
            form.add_error("file", exc.describe())
        else:
            transaction.on_commit(lambda: tasks.import_batch.delay(batch.pk))
            # no flash message: the batch's page says where it is (queued, running, done or failed) and follows it
            if request.htmx:
                return HttpResponseClientRedirect(batch_url(batch))
            return redirect("trajectories:import_detail", batch_id=batch.pk)
    # Every batch, uploaded or run from the command line, newest first, a page at a time.
    batches = ImportBatch.objects.select_related("created_by")
    try:
        page = keyset_page(batches, order=["-created_at"], params=request.GET, size=BATCHES_PER_PAGE)
    except CursorError as exc:
        return invalid_parameter(request, str(exc))
    # A batch left "running" by a dead worker or a killed command says so here too, not only on its own page.
    page.items = [services.import_batch_mark_stalled(batch=batch) for batch in page.items]
    context = {"form": form, "page": page, "max_bytes": settings.PARALLAX_MAX_UPLOAD_BYTES}
    return render(request, "trajectories/import_upload.html", context)


def batch_url(batch: ImportBatch) -> str:
    return reverse("trajectories:import_detail", kwargs={"batch_id": batch.pk})


@require_GET
def import_detail(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins can see import batches.")
    batch = services.import_batch_mark_stalled(
        batch=get_object_or_404(ImportBatch.objects.select_related("created_by"), pk=batch_id)
    )
    template = "trajectories/import_detail.html#progress" if request.htmx else "trajectories/import_detail.html"
    return render(request, template, {"batch": batch})
