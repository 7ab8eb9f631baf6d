from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.roles import can_import
from trajectories.exports import csv_lines

from . import charts, dashboard
from .exports import EXPORT_KINDS, export
from .models import AdvantageTag, Study


def lead_study(request: HttpRequest, study_id: int) -> Study:
    """The study, for its senior adjudicator and admins only (dashboards show everyone's work)."""
    study = get_object_or_404(Study.objects.select_related("codebook", "adjudicator"), pk=study_id)
    if request.user.pk != study.adjudicator_id and not can_import(request.user):
        raise PermissionDenied("Dashboards are for the study's adjudicator and admins.")
    return study


@require_GET
def study_list(request: HttpRequest) -> HttpResponse:
    studies = Study.objects.select_related("codebook", "adjudicator").order_by("-created_at")
    if not can_import(request.user):
        studies = studies.filter(adjudicator=request.user)
    return render(request, "annotation/study_list.html", {"studies": studies})


@require_GET
def study_dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request, study_id)
    report = dashboard.agreement(study=study)
    mode_pairs = [p for p in report["pairs"] if p["levels"]["mode"]["n_shared_items"]]
    per_code = []
    for key, name in report["names"].items():
        values = [p["levels"]["mode"]["per_code_kappa"].get(key) for p in mode_pairs]
        if any(key in p["levels"]["mode"]["per_code_kappa"] for p in mode_pairs):
            defined = [v for v in values if v is not None]
            per_code.append(
                {"key": key, "name": name, "values": values, "mean": sum(defined) / len(defined) if defined else None}
            )
    per_code.sort(key=lambda r: (r["mean"] is None, r["mean"] if r["mean"] is not None else 0))
    over_time = dashboard.kappa_over_time(study=study)
    table3 = dashboard.study_table3(study=study)
    mode_rows = [r for r in table3["rows"] if r["level"] == "mode"]
    context = {
        "study": study,
        "progress": dashboard.progress(study=study),
        "report": report,
        "pairs": report["pairs"],
        "per_code": per_code,
        "mode_pairs": mode_pairs,
        "over_time": over_time,
        "over_time_chart": charts.line([(p["runs"], p["kappa"]) for p in over_time]),
        "table3": table3,
        "table3_chart": charts.bars([(r["name"], r["count"]) for r in mode_rows]),
        "agents": sorted(table3["instances_by_agent"])
        or sorted({r["agent"] for r in dashboard.progress(study=study)["strata"]}),
        "rq1": dashboard.study_rq1(study=study),
        "export_kinds": EXPORT_KINDS,
    }
    return render(request, "annotation/dashboard.html", context)


@require_GET
def advantage(request: HttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request, study_id)
    return render(
        request,
        "annotation/advantage.html",
        {"study": study, "rows": dashboard.advantage_pairs(study=study), "mechanisms": AdvantageTag.Mechanism.choices},
    )


@require_POST
def advantage_tag(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    study = lead_study(request, study_id)
    if not any(row["pair"].concurrent_run_id == run_id for row in dashboard.advantage_pairs(study=study)):
        raise Http404("That run is not a pair where concurrency helped.")
    mechanism = request.POST.get("mechanism", "")
    if mechanism not in AdvantageTag.Mechanism.values:
        messages.error(request, "Choose a mechanism.")
    else:
        AdvantageTag.objects.update_or_create(
            study=study,
            run_id=run_id,
            defaults={"mechanism": mechanism, "note": request.POST.get("note", ""), "tagged_by": request.user},
        )
        messages.success(request, "Tagged.")
    return redirect("annotation:advantage", study_id=study.pk)


@require_GET
def study_export(request: HttpRequest, study_id: int, kind: str) -> StreamingHttpResponse:
    study = lead_study(request, study_id)
    if kind not in EXPORT_KINDS:
        raise Http404(f"No export named {kind!r}.")
    columns, rows = export(study, kind)
    response = StreamingHttpResponse(csv_lines(rows, columns), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-{kind}.csv"'
    return response
