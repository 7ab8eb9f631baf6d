"""Designing and running a study on the web (its adjudicator and admins): create it, edit it, add
runs, assign, replace or add annotators, close it. The same services as the command line."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.roles import ADJUDICATOR, has_role, is_admin
from common.htmx import HtmxHttpRequest
from common.responses import invalid_parameter
from taxonomy.models import Codebook

from ..access import lead_study
from ..errors import AnnotationError
from ..forms import AnnotatorChangeForm, RunFilterForm, StudyEditForm, StudyForm
from ..models import Assignment
from ..selectors import studies as selectors
from ..services import studies as services


def _form_errors(form, exc: AnnotationError) -> None:
    """A service's refusal, on the fields it names (the rest on the form)."""
    placed = False
    for field, message in exc.errors.items():
        if field in form.fields:
            form.add_error(field, message if " " in message else str(exc))
            placed = True
    if not placed:
        form.add_error(None, str(exc))


def _new_form(data=None) -> StudyForm:
    return StudyForm(
        data,
        choices=selectors.run_filter_choices(),
        codebooks=Codebook.objects.filter(status=Codebook.Status.FROZEN).order_by("name", "-version"),
        annotators=selectors.annotator_choices(),
        adjudicators=selectors.adjudicator_choices(),
    )


@require_http_methods(["GET", "POST"])
def study_new(request: HtmxHttpRequest) -> HttpResponse:
    """The new-study form; `?preview` (htmx, on every change) answers how many runs it picks."""
    if not (has_role(request.user, ADJUDICATOR) or is_admin(request.user)):
        raise PermissionDenied("Studies are created by adjudicators and admins.")
    if request.method == "GET" and "preview" in request.GET:
        form = RunFilterForm(request.GET, choices=selectors.run_filter_choices())
        count = None
        if form.is_valid():
            runs = selectors.matching_runs(form.filters())
            ids = form.cleaned_data["run_ids"]
            count = (runs.filter(pk__in=ids) if ids is not None else runs).count()
        return render(request, "annotation/study_new.html#run-count", {"count": count, "form": form})
    form = _new_form(request.POST if request.method == "POST" else None)
    if request.method == "GET":
        form.initial.update(adjudicator=request.user.pk if has_role(request.user, ADJUDICATOR) else None)
        latest = form.fields["codebook"].queryset.order_by("-frozen_at").first()
        form.initial["codebook"] = latest.pk if latest else None
    elif form.is_valid():
        data = form.cleaned_data
        runs = selectors.matching_runs(form.filters())
        if data["run_ids"] is not None:
            runs = runs.filter(pk__in=data["run_ids"])
        run_ids = list(runs.values_list("pk", flat=True))
        try:
            if not run_ids:
                raise AnnotationError("no run matches the filters", {"agent": "no run matches the filters"})
            with transaction.atomic():
                study = services.study_create(
                    name=data["name"], codebook=data["codebook"], annotators=list(data["annotators"]),
                    adjudicator=data["adjudicator"], run_ids=run_ids, seed=data["seed"],
                    coders_per_run=data["coders_per_run"], hint_policy=data["hint_policy"], user=request.user,
                )  # fmt: skip
                made = services.study_assign(study=study) if data["assign_now"] else 0
        except AnnotationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, f"Study {study.name!r} created: {len(run_ids)} runs, {made} assignments.")
            return redirect("annotation:study_manage", study_id=study.pk)
    context = {"form": form, "count": None if form.is_bound else selectors.matching_runs({}).count()}
    return render(request, "annotation/study_new.html", context, status=422 if form.errors else 200)


def _manage_context(study, **forms) -> dict:
    current = study.annotators.order_by("username")
    assigned = Assignment.objects.filter(study=study).exists()
    context = {
        "study": study,
        "balance": selectors.study_balance(study=study),
        "annotators": current,
        "edit_form": StudyEditForm(
            initial={
                "name": study.name,
                "adjudicator": study.adjudicator_id,
                "seed": study.seed,
                "coders_per_run": study.coders_per_run,
            },
            adjudicators=selectors.adjudicator_choices(),
            assigned=assigned,
        ),  # fmt: skip
        "runs_form": RunFilterForm(choices=selectors.run_filter_choices()),
        "people_form": AnnotatorChangeForm(
            current=current,
            candidates=selectors.annotator_choices().exclude(pk__in=current).exclude(pk=study.adjudicator_id),
        ),
        "runs": study.runs.count(),
    }
    report = context["balance"]
    names, current_ids = report["names"], set(current.values_list("pk", flat=True))
    loads = report["annotators"]["counts"]
    context["balance_rows"] = [
        {"name": names.get(pk, pk), "runs": loads.get(pk, 0), "current": pk in current_ids}
        for pk in sorted(set(loads) | current_ids, key=lambda pk: str(names.get(pk)))
    ]
    context["pair_rows"] = [
        {"names": " + ".join(str(names.get(pk, pk)) for pk in pair), "runs": n}
        for pair, n in sorted(report["pairs"]["counts"].items(), key=lambda item: [str(names.get(p)) for p in item[0]])
    ]
    context.update(forms)
    return context


@require_http_methods(["GET"])
def study_manage(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
    return render(request, "annotation/study_manage.html", _manage_context(study))


ACTIONS = ("edit", "add_runs", "assign", "replace_annotator", "add_annotator", "close", "reopen")


@require_POST
def study_manage_action(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """One change to the study, named by `action`; a refusal shows the page again with the error on
    its form (422), and nothing is changed."""
    study = lead_study(request.user, study_id)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        return invalid_parameter(request, f"'action' must be one of {', '.join(ACTIONS)}, got {action[:40]!r}")
    context = _manage_context(study)
    try:
        done = _act(request, study, action, context)
    except AnnotationError as exc:
        form = context.get(_FORM_OF[action])
        if form is not None and form.is_bound:
            _form_errors(form, exc)
        context["error"] = str(exc)
        return render(request, "annotation/study_manage.html", context, status=422)
    if done is None:  # the form itself was invalid
        return render(request, "annotation/study_manage.html", context, status=422)
    messages.success(request, done)
    return redirect("annotation:study_manage", study_id=study.pk)


_FORM_OF = {"edit": "edit_form", "add_runs": "runs_form", "replace_annotator": "people_form",
            "add_annotator": "people_form"}  # fmt: skip


def _act(request: HtmxHttpRequest, study, action: str, context: dict) -> str | None:
    user, post = request.user, request.POST
    if action == "edit":
        form = context["edit_form"] = StudyEditForm(post, initial=context["edit_form"].initial,
                                                    adjudicators=selectors.adjudicator_choices(),
                                                    assigned=context["edit_form"].fields["seed"].disabled)  # fmt: skip
        if not form.is_valid():
            return None
        services.study_update(study=study, actor=user, **form.cleaned_data)
        return "Study saved."
    if action == "add_runs":
        form = context["runs_form"] = RunFilterForm(post, choices=selectors.run_filter_choices())
        if not form.is_valid():
            return None
        runs = selectors.matching_runs(form.filters(), not_in=study)
        if form.cleaned_data["run_ids"] is not None:
            runs = runs.filter(pk__in=form.cleaned_data["run_ids"])
        added = services.study_add_runs(study=study, run_ids=list(runs.values_list("pk", flat=True)), actor=user)
        return f"{added} runs added and assigned."
    if action == "assign":
        return f"{services.study_assign(study=study)} assignments made."
    if action in ("replace_annotator", "add_annotator"):
        form = context["people_form"] = AnnotatorChangeForm(
            post, current=context["people_form"].fields["leaving"].queryset,
            candidates=context["people_form"].fields["replacement"].queryset,
        )  # fmt: skip
        if not form.is_valid():
            return None
        leaving, replacement = form.cleaned_data["leaving"], form.cleaned_data["replacement"]
        if action == "add_annotator":
            if replacement is None:
                raise AnnotationError("choose the annotator to add", {"replacement": "choose the annotator to add"})
            result = services.study_add_annotator(study=study, annotator=replacement, actor=user)
            return (f"{replacement.get_username()} joined: {result['moved']} assignments of "
                    f"{result['unstarted_runs']} unstarted runs dealt again.")  # fmt: skip
        if leaving is None:
            raise AnnotationError("choose the annotator who leaves", {"leaving": "choose the annotator who leaves"})
        result = services.annotator_replace(study=study, leaving=leaving, replacement=replacement, actor=user)
        return f"{leaving.get_username()} left: {result['moved']} runs moved, {result['kept']} submitted kept."
    services.study_close(study=study, actor=user, reopen=action == "reopen")
    return "Study reopened." if action == "reopen" else "Study closed: no more coding, runs or assignments."
