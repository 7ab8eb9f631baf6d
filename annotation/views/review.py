"""Reviewing a run's two codings: the discussions (comments, consensus, escalation) and the
senior adjudicator's queue and ruling."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.htmx import HtmxHttpRequest
from trajectories.benchmarks import canonical_benchmark
from trajectories.selectors import pair_sides

from ..errors import AnnotationError
from ..models import Discussion
from ..selectors import review as selectors
from ..services import review as flow


def _discussion(request: HtmxHttpRequest, discussion_id: int) -> Discussion:
    discussion = selectors.discussion_for(user=request.user, discussion_id=discussion_id)
    if discussion is None:
        raise Http404("No such discussion of yours.")
    return discussion


@require_GET
def discussion_list(request: HtmxHttpRequest) -> HttpResponse:
    return render(
        request, "annotation/discussion_list.html", {"discussions": selectors.my_discussions(user=request.user)}
    )


@require_GET
def discussion_detail(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    discussion = _discussion(request, discussion_id)
    context = {
        "discussion": discussion,
        "compare": selectors.codings_compare(discussion=discussion),
        "comments": discussion.comments.select_related("author"),
        "is_participant": request.user.pk in selectors.participants(discussion),
        "my_assignment": discussion.study.assignments.filter(run_id=discussion.run_id, annotator=request.user).first(),
    }
    template = "annotation/discussion_detail.html#comments" if request.htmx else "annotation/discussion_detail.html"
    return render(request, template, context)


@require_POST
def discussion_comment(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    discussion = _discussion(request, discussion_id)
    try:
        flow.discussion_comment(discussion=discussion, author=request.user, text=request.POST.get("text", ""))
    except AnnotationError as exc:
        messages.error(request, str(exc))
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
    filters = {key: request.GET.get(key, "").strip() for key in ("agent", "benchmark", "study")}
    filters["benchmark"] = canonical_benchmark(filters["benchmark"])  # a link may spell it another way
    queue = list(selectors.adjudication_queue(user=request.user, filters=filters))
    choices = selectors.adjudication_filter_choices(user=request.user)
    return render(
        request, "annotation/adjudication_queue.html", {"queue": queue, "filters": filters, "choices": choices}
    )


@require_http_methods(["GET", "POST"])
def adjudicate(request: HtmxHttpRequest, discussion_id: int) -> HttpResponse:
    discussion = _discussion(request, discussion_id)
    if request.user.pk != discussion.study.adjudicator_id:
        raise Http404("Only the study's adjudicator adjudicates.")
    error = ""
    if request.method == "POST":
        try:
            rulings = [
                flow.Ruling(code_id=int(code_id), rationale=request.POST.get(f"rationale-{code_id}", ""))
                for code_id in request.POST.getlist("code")
            ]
            flow.adjudicate(
                discussion=discussion,
                actor=request.user,
                rulings=rulings,
                no_failure=request.POST.get("no_failure") == "on",
                note=request.POST.get("note", ""),
            )
        except (AnnotationError, ValueError) as exc:
            error = str(exc)
        else:
            messages.success(request, f"Run {discussion.run.task.external_id} adjudicated.")
            return redirect("annotation:adjudication_queue")
    modes = discussion.study.codebook.codes.filter(level="mode").select_related("parent").order_by("position")
    context = {
        "discussion": discussion,
        "compare": selectors.codings_compare(discussion=discussion),
        "comments": discussion.comments.select_related("author"),
        "modes": modes,
        "error": error,
        **pair_sides(discussion.run),
    }
    return render(request, "annotation/adjudicate.html", context, status=422 if error else 200)
