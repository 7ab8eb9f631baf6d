"""The suggestions learned from gold (docs/suggestions.md), for a study's adjudicator and admins: train
a model (the worker does it; the page follows its progress), its cross-validated scores per mode,
its calibration and its provenance. Annotators never reach these pages."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from common.htmx import HtmxHttpRequest
from common.responses import invalid_parameter
from taxonomy.models import Code

from ..access import lead_study
from ..classifier import Params
from ..errors import AnnotationError
from ..models import Study, SuggestionModel
from ..selectors import suggestions as selectors
from ..services.suggestions import study_queue_order_set, suggestions_train_request
from . import charts


def _page(request: HtmxHttpRequest, study: Study, *, error: str = "", form=None, status: int = 200) -> HttpResponse:
    models = selectors.study_models(study=study)
    current = selectors.current_model(study=study, full=True)
    latest = models[0] if models else None
    defaults = selectors.training_defaults(study=study, latest=latest)
    names = dict(Code.objects.filter(codebook_id=study.codebook_id, level=Code.Level.MODE).values_list("key", "name"))
    context = {
        "study": study,
        "models": models,
        "latest": latest,
        "current": current,
        "names": names,
        "error": error,
        # the training form: as posted when refused, else the latest model's parameters or defaults that fit
        "form": {
            name: (form or {}).get(name, "")[:40] or default for name, default in defaults.items() if name != "note"
        },
        "defaults_note": defaults["note"],
    }
    if current is not None:
        context["scores"] = [{**row, "name": names.get(row["key"], row["key"])} for row in current.scores]
        named = [{**row, "name": names.get(row["key"], row["key"])} for row in current.skipped]
        context["skipped"] = [row for row in named if row["positives"]]
        context["unseen"] = [row["name"] for row in named if not row["positives"]]  # listed in one line
        context["chart"] = charts.calibration(current.calibration)
        context["label_counts"] = sorted(
            ((names.get(k, k), n) for k, n in current.label_counts.items() if n), key=lambda item: -item[1]
        )
    return render(request, "annotation/suggestions.html", context, status=status)


@require_GET
def suggestions(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    return _page(request, lead_study(request.user, study_id))


@require_POST
def suggestions_train(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """Queue a training with the seed given; refused input comes back on the page with its field named (422)."""
    study = lead_study(request.user, study_id)
    defaults = Params()
    values = {}
    for name, default in (("seed", None), ("folds", defaults.folds), ("min_positives", defaults.min_positives)):
        raw = request.POST.get(name, "").strip()
        if raw == "" and default is not None:
            values[name] = default
        elif raw.isascii() and raw.isdigit():
            values[name] = int(raw)
        else:
            error = f"{name}: must be a whole number, got {raw[:40]!r}"
            return _page(request, study, error=error, form=request.POST, status=422)
    params = Params(seed=values["seed"], folds=values["folds"], min_positives=values["min_positives"])
    try:
        suggestions_train_request(study=study, actor=request.user, seed=values["seed"], params=params)
    except AnnotationError as exc:
        return _page(request, study, error=str(exc), form=request.POST, status=422)
    messages.success(request, "Training queued: the worker reports its progress below.")
    return redirect("annotation:suggestions", study_id=study.pk)


@require_GET
def suggestions_status(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The page asks while a model trains: the progress line back, or — once the model it showed
    (`?model=`) has finished — a reload of the page."""
    study = lead_study(request.user, study_id)
    raw = request.GET.get("model", "")
    if not (raw.isascii() and raw.isdigit()):
        return invalid_parameter(request, f"'model' must be a model number, got {raw[:40]!r}")
    latest = (
        SuggestionModel.objects.filter(study=study, pk=int(raw))
        .only("pk", "status", "folds_done", "folds_total", "error", "created_at", "seconds", "study_id")
        .first()
    )
    if latest is None:
        return invalid_parameter(request, f"'model': no model {raw} of this study")
    if latest.is_finished:
        return HttpResponseClientRefresh()  # htmx reloads the whole page
    return render(request, "annotation/suggestions.html#status", {"study": study, "latest": latest})


@require_POST
def suggestions_queue_order(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """Turn the ordering of annotators' queues by the model's uncertainty on or off (`order`:
    `uncertainty` or `seed`); anything else is refused with the field named (422)."""
    study = lead_study(request.user, study_id)
    order = request.POST.get("order", "")
    if order not in ("uncertainty", "seed"):
        return _page(request, study, error=f"order: must be 'uncertainty' or 'seed', got {order[:40]!r}", status=422)
    moved = study_queue_order_set(study=study, by_uncertainty=order == "uncertainty", actor=request.user)
    said = "by the model's uncertainty" if order == "uncertainty" else "in the order drawn from the study's seed"
    messages.success(request, f"Annotators' untouched runs are now {said}: {moved} moved.")
    return redirect("annotation:suggestions", study_id=study.pk)
