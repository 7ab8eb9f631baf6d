"""The reproducibility bundle on the dashboard: ask the worker for one, follow its progress, download
the newest finished one (annotation/services/bundles.py builds it; the study's lead only)."""

from __future__ import annotations

from django.http import FileResponse, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from common.htmx import HtmxHttpRequest

from ..access import lead_study
from ..selectors.bundle import bundle_file, bundle_state
from ..services.bundles import bundle_request


@require_GET
def bundle_download(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The newest finished bundle, as its file (named with the statistics version it carries)."""
    study = lead_study(request.user, study_id)
    ready = bundle_state(study)["ready"]
    if ready is None:
        return HttpResponse(
            "No reproducibility bundle is ready: build one on the study's dashboard.",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    name = f"study-{study.pk}-bundle-v{ready.version}.zip"
    return FileResponse(bundle_file(ready).open("rb"), as_attachment=True, filename=name)


@require_POST
def bundle_build(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """Ask the worker for a bundle (or follow the one it is building)."""
    study = lead_study(request.user, study_id)
    bundle_request(study=study, actor=request.user)
    if request.htmx:
        return render(request, "annotation/partials/bundle_card.html", {"study": study, **bundle_state(study)})
    return redirect(reverse("annotation:dashboard", args=[study.pk]) + "#bundle")


@require_GET
def bundle_status(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The bundle card again, while the worker builds (the page asks every second)."""
    study = lead_study(request.user, study_id)
    return render(request, "annotation/partials/bundle_card.html", {"study": study, **bundle_state(study)})
