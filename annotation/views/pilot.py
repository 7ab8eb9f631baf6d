"""Pilot open coding: an annotator's pilot runs and open codes; an admin consolidates and
promotes them into the pilot's draft codebook (one draft that every promotion adds to)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import is_admin
from common.htmx import HtmxHttpRequest
from trajectories.selectors import pair_sides

from ..errors import AnnotationError
from ..models import OpenCode, PilotRound
from ..selectors.pilot import pilot_groups
from ..services.pilot import Promotion, open_codes_set, pilot_open_draft, pilot_promote


def _my_pilot(request: HtmxHttpRequest, pilot_id: int) -> PilotRound:
    pilot = PilotRound.objects.filter(pk=pilot_id, annotators=request.user).first()
    if pilot is None:
        raise Http404("No such pilot round of yours.")
    return pilot


@require_GET
def pilot_home(request: HtmxHttpRequest, pilot_id: int) -> HttpResponse:
    pilot = _my_pilot(request, pilot_id)
    mine = {}
    for code in OpenCode.objects.filter(pilot=pilot, annotator=request.user):
        mine.setdefault(code.run_id, []).append(code.text)
    runs = pilot.runs.select_related("task__benchmark", "agent").order_by("task__benchmark__name", "task__external_id")
    rows = [{"run": run, "codes": mine.get(run.pk, [])} for run in runs]
    return render(request, "annotation/pilot_home.html", {"pilot": pilot, "rows": rows})


@require_http_methods(["GET", "POST"])
def pilot_run(request: HtmxHttpRequest, pilot_id: int, run_id: int) -> HttpResponse:
    pilot = _my_pilot(request, pilot_id)
    run = get_object_or_404(pilot.runs.select_related("task__benchmark", "agent"), pk=run_id)
    error = ""
    if request.method == "POST":
        try:
            open_codes_set(
                pilot=pilot,
                run_id=run.pk,
                annotator=request.user,
                texts=request.POST.get("codes", "").splitlines(),
                memo=request.POST.get("memo", ""),
            )
        except AnnotationError as exc:
            error = str(exc)
        else:
            messages.success(request, "Open codes saved.")
            return redirect("annotation:pilot_home", pilot_id=pilot.pk)
    codes = OpenCode.objects.filter(pilot=pilot, run=run, annotator=request.user)
    context = {
        "pilot": pilot,
        "codes_text": "\n".join(c.text for c in codes),
        "memo": codes[0].memo if codes else "",
        "error": error,
        **pair_sides(run),
    }
    return render(request, "annotation/pilot_run.html", context, status=422 if error else 200)


@require_GET
def pilot_consolidate(request: HtmxHttpRequest, pilot_id: int) -> HttpResponse:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins consolidate pilot codes.")
    pilot = get_object_or_404(PilotRound.objects.select_related("base_codebook", "result_codebook"), pk=pilot_id)
    draft = pilot.result_codebook if pilot.result_codebook and not pilot.result_codebook.is_frozen else None
    target = draft or pilot.result_codebook or pilot.base_codebook
    parents = (
        target.codes.exclude(level="mode").select_related("parent").order_by("position") if target is not None else []
    )
    return render(
        request,
        "annotation/pilot_consolidate.html",
        {"pilot": pilot, "groups": pilot_groups(pilot=pilot), "parents": parents, "draft": draft},
    )


@require_POST
def pilot_draft_view(request: HtmxHttpRequest, pilot_id: int) -> HttpResponse:
    """Open (or go to) the pilot's draft in the codebook editor: a pilot without a base codebook
    builds its categories and subcategories there."""
    if not is_admin(request.user):
        raise PermissionDenied("Only admins consolidate pilot codes.")
    pilot = get_object_or_404(PilotRound, pk=pilot_id)
    draft = pilot_open_draft(pilot=pilot, user=request.user)
    return redirect("taxonomy:codebook_edit", codebook_id=draft.pk)


@require_POST
def pilot_promote_view(request: HtmxHttpRequest, pilot_id: int) -> HttpResponse:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins consolidate pilot codes.")
    pilot = get_object_or_404(PilotRound, pk=pilot_id)
    groups = request.POST.getlist("group")
    if not groups:
        messages.error(request, "Select at least one group to promote.")
        return redirect("annotation:pilot_consolidate", pilot_id=pilot.pk)
    promotion = Promotion(
        group_keys=groups,
        name=request.POST.get("name", "").strip(),
        parent_key=request.POST.get("parent_key", ""),
        level=request.POST.get("level", "mode"),
        definition=request.POST.get("definition", ""),
    )
    try:
        codebook = pilot_promote(pilot=pilot, promotions=[promotion], user=request.user)
    except AnnotationError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:pilot_consolidate", pilot_id=pilot.pk)
    messages.success(request, f"Promoted into {codebook}.")
    return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)
