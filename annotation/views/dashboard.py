"""A study's pages for its senior adjudicator and admins: the list of studies, the dashboard
(progress, agreement, Table 3, RQ1), the RQ4 pairs to tag, and the CSV exports."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.roles import is_admin
from config.htmx import HtmxHttpRequest
from trajectories.exports import csv_lines

from ..access import lead_study
from ..models import AdvantageTag, Study
from ..selectors import bundle, dashboard, history
from ..selectors.exports import EXPORT_KINDS, export
from ..services.review import advantage_tag
from ..stats import charts


@require_GET
def study_list(request: HtmxHttpRequest) -> HttpResponse:
    studies = Study.objects.select_related("codebook", "adjudicator").order_by("-created_at")
    if not is_admin(request.user):
        studies = studies.filter(adjudicator=request.user)
    return render(request, "annotation/study_list.html", {"studies": studies})


@require_GET
def study_dashboard(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
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
    table3 = dashboard.study_failure_modes(study=study)
    mode_rows = [r for r in table3["rows"] if r["level"] == "mode"]
    context = {
        "study": study,
        "progress": dashboard.progress(study=study),
        "report": report,
        "pairs": report["pairs"],
        "per_code": per_code,
        "mode_pairs": mode_pairs,
        "over_time": over_time,
        "over_time_chart": charts.line(
            [(p["runs"], p["kappa"]) for p in over_time],
            x_label="runs coded by both annotators (count, in the order they were completed)",
            y_label="mean pooled κ (modes)",
        ),
        "table3": table3,
        "table3_chart": charts.bars(
            [(r["name"], r["count"]) for r in mode_rows], x_label="instances in the final labels (count)"
        ),
        "agents": sorted(table3["instances_by_agent"])
        or sorted({r["agent"] for r in dashboard.progress(study=study)["strata"]}),
        "rq1": dashboard.study_outcomes(study=study),
        "export_kinds": EXPORT_KINDS,
    }
    return render(request, "annotation/dashboard.html", context)


@require_GET
def helped_pairs(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
    return render(
        request,
        "annotation/helped_pairs.html",
        {"study": study, "rows": dashboard.helped_pairs(study=study), "mechanisms": AdvantageTag.Mechanism.choices},
    )


@require_POST
def helped_pair_tag(request: HtmxHttpRequest, study_id: int, run_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
    if not any(row["pair"].concurrent_run_id == run_id for row in dashboard.helped_pairs(study=study)):
        raise Http404("That run is not a pair where concurrency helped.")
    mechanism = request.POST.get("mechanism", "")
    if mechanism not in AdvantageTag.Mechanism.values:
        messages.error(request, "Choose a mechanism.")
    else:
        advantage_tag(study=study, run_id=run_id, mechanism=mechanism, note=request.POST.get("note", ""),
                      actor=request.user)  # fmt: skip
        messages.success(request, "Tagged.")
    return redirect("annotation:helped_pairs", study_id=study.pk)


@require_GET
def run_history(request: HtmxHttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """Everything recorded about one run in one study: for its adjudicator and admins."""
    study = lead_study(request.user, study_id)
    run = get_object_or_404(study.runs.select_related("task__benchmark", "agent"), pk=run_id)
    rows = history.run_history(study=study, run_id=run.pk)
    records = run.published_records.filter(study=study)
    context = {"study": study, "run": run, "rows": rows, "records": records}
    return render(request, "annotation/run_history.html", context)


@require_GET
def study_bundle(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The reproducibility bundle: every table behind the dashboard, as CSV and Parquet, with the
    study's parameters and the dashboard's own numbers (annotation/selectors/bundle.py)."""
    study = lead_study(request.user, study_id)
    response = HttpResponse(bundle.study_bundle(study), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-bundle.zip"'
    return response


@require_GET
def study_export(request: HtmxHttpRequest, study_id: int, kind: str) -> StreamingHttpResponse:
    study = lead_study(request.user, study_id)
    if kind not in EXPORT_KINDS:
        raise Http404(f"No export named {kind!r}.")
    columns, rows = export(study, kind)
    response = StreamingHttpResponse(csv_lines(rows, columns), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-{kind}.csv"'
    return response
