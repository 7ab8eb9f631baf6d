"""Reviewing a run's two codings: the discussions (comments, consensus, escalation) and the
senior adjudicator's queue and ruling."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.htmx import HtmxHttpRequest
from common.keyset import CursorError
from common.responses import invalid_parameter
from trajectories.benchmarks import canonical_benchmark
from trajectories.selectors import pair_sides

from ..access import may_adjudicate
from ..errors import AnnotationError
from ..forms import RULING_INPUTS, parse_ruling_form
from ..models import MAX_INSTANCES, Discussion
from ..selectors import review as selectors
from ..selectors import suggestions as suggestion_selectors
from ..selectors.hints import review_hints
from ..services import review as flow


def _discussion(request: HtmxHttpRequest, discussion_id: int) -> Discussion:
    discussion = selectors.discussion_for(user=request.user, discussion_id=discussion_id)
    if discussion is None:
        raise Http404("No such discussion of yours.")
    return discussion


@require_GET
def discussion_list(request: HtmxHttpRequest) -> HttpResponse:
    """The user's discussions, a tab per state (open first), one page at a time."""
    tab = request.GET.get("tab", "open")
    if tab not in selectors.DISCUSSION_TABS:
        return invalid_parameter(
            request, f"'tab' must be one of {', '.join(selectors.DISCUSSION_TABS)}, got {tab[:40]!r}"
        )
    try:
        page = selectors.my_discussion_page(user=request.user, tab=tab, params=request.GET)
    except CursorError as exc:
        return invalid_parameter(request, str(exc))
    counts = selectors.my_discussion_counts(user=request.user)
    tabs = [(key, label, counts[key]) for key, (label, _) in selectors.DISCUSSION_TABS.items()]
    return render(request, "annotation/discussion_list.html", {"page": page, "tab": tab, "tabs": tabs})


@require_GET
def discussion_detail(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    return _detail_page(request, _discussion(request, discussion_id))


def _detail_page(request: HtmxHttpRequest, discussion, *, error: str = "", text: str = "", status: int = 200):
    """The discussion page (its comments alone for htmx), with a refused comment's reason and text kept."""
    compare = selectors.codings_compare(discussion=discussion)
    context = {
        "comment_error": error,
        "comment_text": text,
        "discussion": discussion,
        "compare": compare,
        "changes": selectors.coding_changes(discussion=discussion, compare=compare),
        "final": selectors.final_for(discussion=discussion),
        "comments": discussion.comments.select_related("author"),
        "is_participant": request.user.pk in selectors.participants(discussion),
        "my_assignment": discussion.study.assignments.filter(run_id=discussion.run_id, annotator=request.user).first(),
        "hints": review_hints(user=request.user, run=discussion.run, codebook=discussion.study.codebook),
    }
    if not request.htmx:  # the pair, under the log's keys (the comments alone need none of it)
        context.update(pair_sides(discussion.run))
    template = "annotation/discussion_detail.html#comments" if request.htmx else "annotation/discussion_detail.html"
    return render(request, template, context, status=status)


@require_POST
def discussion_comment(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    discussion = _discussion(request, discussion_id)
    text = request.POST.get("text", "")
    try:
        flow.discussion_comment(discussion=discussion, author=request.user, text=text)
    except AnnotationError as exc:
        # refused (empty, too long, a NUL, a closed case): said beside the form, the text kept, a 4xx
        kept = text[:50_000].replace("\x00", "").encode("utf-8", "replace").decode("utf-8")  # shown again, safely
        return _detail_page(request, discussion, error=str(exc), text=kept, status=422)
    if request.htmx:
        return render(
            request,
            "annotation/discussion_detail.html#comments",
            {"discussion": discussion, "comments": discussion.comments.select_related("author")},
        )
    return redirect("annotation:discussion", discussion_id=discussion.pk)


@require_POST
def discussion_resolve(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    discussion = _discussion(request, discussion_id)
    action = request.POST.get("action")
    try:
        if action == "consensus":
            flow.discussion_consensus(discussion=discussion, actor=request.user)
            messages.success(request, "Resolved by consensus: the final labels are recorded.")
        elif action == "escalate":
            flow.discussion_escalate(discussion=discussion, actor=request.user)
            messages.success(request, "Escalated to the senior adjudicator.")
        else:
            messages.error(request, "Unknown action.")
    except AnnotationError as exc:
        messages.error(request, str(exc))
    return redirect("annotation:discussion", discussion_id=discussion.pk)


@require_GET
def adjudication_queue(request: HtmxHttpRequest) -> HttpResponse:
    """The senior adjudicator's queue: for adjudicators (and whoever adjudicates a study) and admins; an annotator
    is refused (403), not shown an empty queue with its controls."""
    if not may_adjudicate(request.user):
        raise PermissionDenied("The adjudication queue is for adjudicators.")
    filters = {key: request.GET.get(key, "").strip() for key in ("agent", "benchmark", "study")}
    filters["benchmark"] = canonical_benchmark(filters["benchmark"])  # a link may spell it another way
    order = request.GET.get("order") or "agreement"
    if order not in selectors.ADJUDICATION_ORDERS:
        return invalid_parameter(
            request, f"'order' must be one of {', '.join(selectors.ADJUDICATION_ORDERS)}, got {order[:40]!r}"
        )
    try:
        page = selectors.adjudication_page(user=request.user, filters=filters, params=request.GET, order=order)
    except CursorError as exc:
        return invalid_parameter(request, str(exc))
    choices = selectors.adjudication_filter_choices(user=request.user)
    orders = selectors.ADJUDICATION_ORDERS
    context = {"page": page, "filters": filters, "choices": choices, "order": order, "orders": orders,
               "order_label": orders[order]}  # fmt: skip
    return render(request, "annotation/adjudication_queue.html", context)


@require_http_methods(["GET", "POST"])
def adjudicate(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    """The ruling on an escalated discussion; before escalation and once the run is final, the page
    only shows (the final labels, who decided and when)."""
    discussion = _discussion(request, discussion_id)
    if request.user.pk != discussion.study.adjudicator_id:
        raise Http404("Only the study's adjudicator adjudicates.")
    error, errors, status = "", {}, 200
    if request.method == "POST":
        try:
            flow.adjudicate(discussion=discussion, actor=request.user, **parse_ruling_form(request.POST))
        except AnnotationError as exc:
            error, errors = str(exc), exc.errors
            # A refused ruling on an escalated case is bad input; on any other case, the wrong state.
            status = 422 if discussion.status == Discussion.Status.ESCALATED else 409
        else:
            messages.success(request, f"Run {discussion.run.task.external_id} adjudicated: the final labels are below.")
            return redirect("annotation:adjudicate", discussion_id=discussion.pk)
    compare = selectors.codings_compare(discussion=discussion)
    final = selectors.final_for(discussion=discussion)
    # the adjudicator's alone (this view refuses anyone else): never on an annotator's page
    used = {row["code"].key for row in compare["rows"]}
    suggested = suggestion_selectors.likely_missed(study=discussion.study, run_id=discussion.run_id, used=used)
    context = {
        "suggested": suggested,
        "discussion": discussion,
        "compare": compare,
        "changes": selectors.coding_changes(discussion=discussion, compare=compare),
        "comments": discussion.comments.select_related("author"),
        "modes": _ruling_form(request, discussion, compare, errors, suggested)
        if discussion.status == Discussion.Status.ESCALATED
        else None,
        "final": final,
        "max_episodes": MAX_INSTANCES,
        "next_case": selectors.adjudication_queue(user=request.user).first() if final else None,
        "posted": {"no_failure": request.POST.get("no_failure") == "on", "note": request.POST.get("note", "")},
        "error": error,
        "errors": errors,
        "hints": review_hints(user=request.user, run=discussion.run, codebook=discussion.study.codebook),
        **pair_sides(discussion.run),
    }
    return render(request, "annotation/adjudicate.html", context, status=status)


def _ruling_form(
    request: HtmxHttpRequest, discussion: Discussion, compare: dict, errors: dict, suggested: dict
) -> dict:
    """The modes to rule on (selectors.review.ruling_modes), each with what this request posted for it
    and the errors of its fields, so that a refused ruling comes back as it was typed, and — for a
    likely-missed code — the probability the study's suggestions model gives it (`likely`)."""
    modes = selectors.ruling_modes(discussion=discussion, compare=compare)
    picked = request.POST.getlist("code")
    likely = {m["key"]: m["p"] for m in suggested["modes"]}
    for row in [*modes["proposed"], *modes["others"]]:
        pk = row["code"].pk
        row["likely"] = likely.get(row["code"].key)
        row["checked"] = str(pk) in picked
        row["values"] = {name: request.POST.get(f"{name}-{pk}", "") for name in RULING_INPUTS}
        if request.method != "POST":
            row["values"]["episodes"] = row["episodes"] or ""
        row["errors"] = {name: errors.get(f"{name}-{pk}", "") for name in (*RULING_INPUTS, "code")}
    return modes
