"""A study's codebook versions: which it pinned when, and the move to another frozen version with
a key map (the study's adjudicator and admins)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from common.htmx import HtmxHttpRequest
from taxonomy.models import Codebook
from taxonomy.tree import TreeError, parse_key_map

from ..access import lead_study
from ..errors import AnnotationError
from ..models import StudyCodebookMove
from ..selectors import progress
from ..services.codebook_move import study_move_codebook


@require_http_methods(["GET", "POST"])
def study_codebook(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
    error, errors = "", {}
    if request.method == "POST":
        raw = request.POST.get("codebook", "")
        valid = raw.isascii() and raw.isdigit() and len(raw) < 10
        target = Codebook.objects.filter(pk=int(raw)).first() if valid else None
        try:
            if target is None:
                raise AnnotationError("choose the codebook version to move to", {"codebook": "missing"})
            move = study_move_codebook(
                study=study,
                codebook=target,
                key_map=parse_key_map(request.POST.get("key_map", "")),
                actor=request.user,
                note=request.POST.get("note", ""),
            )
        except (AnnotationError, TreeError) as exc:
            error, errors = f"{exc} — nothing was changed.", getattr(exc, "errors", {})
        else:
            messages.success(
                request,
                f"{study} now codes against {move.to_codebook}: {move.mapped_labels} label(s) carried over, "
                f"{move.reopened} coding(s) reopened for re-coding.",
            )
            return redirect("annotation:study_codebook", study_id=study.pk)
    context = {
        "study": study,
        "moves": StudyCodebookMove.objects.filter(study=study).select_related("from_codebook", "to_codebook", "actor"),
        "targets": Codebook.objects.filter(status=Codebook.Status.FROZEN).exclude(pk=study.codebook_id),
        "used": progress.mode_usage(study=study),
        "error": error,
        "errors": errors,
        "posted": request.POST,
    }
    return render(request, "annotation/study_codebook.html", context, status=422 if error else 200)
