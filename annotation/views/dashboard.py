"""A study's pages for its senior adjudicator and admins: the list of studies, the dashboard
(progress, agreement, Table 3, RQ1), the RQ4 pairs to tag, and the CSV exports."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from accounts.roles import ADJUDICATOR, has_role, is_admin
from common.htmx import HtmxHttpRequest
from common.responses import invalid_parameter
from trajectories.exports import csv_lines

from ..access import blind_to_pair, lead_study
from ..analysis.document import StudyAnalysis
from ..analysis.inputs import pair_outcomes
from ..analysis.reports import concurrency_helped
from ..analysis.store import NotComputed, analysis_request, stored_analysis
from ..forms import AnalysisSettingsForm
from ..models import AdvantageTag, PublishedRecord, Study
from ..published_files import KIND_FILES
from ..selectors import bundle, history, progress
from ..selectors.exports import EXPORT_KINDS, export, statistics_file_suffix, statistics_headers
from ..selectors.published import published_records_shown
from ..services.analysis import study_analysis_update
from ..services.review import advantage_tag
from ..study_settings import CODE_UNIVERSES, SettingsError
from . import charts


@require_GET
def study_list(request: HtmxHttpRequest) -> HttpResponse:
    studies = (
        Study.objects.select_related("codebook", "adjudicator")
        .annotate(n_annotators=Count("annotators", distinct=True))
        .order_by("-created_at")
    )
    if not is_admin(request.user):
        studies = studies.filter(adjudicator=request.user)
    can_create = is_admin(request.user) or has_role(request.user, ADJUDICATOR)
    return render(request, "annotation/study_list.html", {"studies": studies, "can_create": can_create})


@require_GET
def study_dashboard(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """Progress (live counts) and the statistics the worker last computed, saying whether they are
    current: nothing here computes a statistic."""
    study = lead_study(request.user, study_id)
    stored = stored_analysis(study)
    document = stored.document
    context = {
        "study": study,
        "progress": progress.progress(study=study),
        "stored": stored,
        "stats": document,
        "export_kinds": EXPORT_KINDS,
        "bundles": bundle.bundle_state(study, study_version=stored.version),
        **(_statistics_context(document) if document else {}),
    }
    return render(request, "annotation/dashboard.html", context)


def _statistics_context(document: StudyAnalysis) -> dict:
    report, table3, over_time = document.agreement, document.table3, document.over_time
    mode_rows = [r for r in table3.get("rows", []) if r["level"] == "mode"]
    return {
        "report": report,
        "pairs": report.get("pairs", []),
        "per_code": document.per_code,
        "mode_pairs": [p for p in report.get("pairs", []) if p["levels"]["mode"]["n_shared_items"]],
        "over_time": over_time,
        "by_version": document.by_version,
        "over_time_chart": charts.line(
            [(p["runs"], p["kappa"]) for p in over_time],
            x_label="runs compared (coded by two annotators, in the order their second coding came in)",
            y_label="mean pooled κ (modes)",
        ),
        "table3": table3,
        "table3_chart": charts.bars(
            [(r["name"], r["count"]) for r in mode_rows], x_label="instances in the final labels (count)"
        ),
        "agents": sorted(table3.get("instances_by_agent", {})) or document.agents,
        "rq1": document.rq1,
        "rq2": document.rq2,
        "signatures": document.signatures,
        "used": None if "settings" in document.missing else document.settings,
        "universe_label": CODE_UNIVERSES.get(document.settings.kappa_universe),
    }


@require_GET
def statistics_status(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The dashboard asks, while its figures are not current: the same status line back, or — once
    newer statistics than those shown have landed — a reload of the page. Two queries."""
    study = lead_study(request.user, study_id)
    stored = stored_analysis(study, read=())
    shown = request.GET.get("shown")
    if shown is not None and not (shown.isascii() and shown.lstrip("-").isdigit()):
        return invalid_parameter(request, f"'shown' must be a version number, got {shown[:40]!r}")
    if shown is not None and stored.statistics is not None and stored.statistics.version > int(shown):
        return HttpResponseClientRefresh()  # htmx reloads the whole page
    return render(request, "annotation/partials/statistics_status.html", {"study": study, "stored": stored})


@require_POST
def statistics_refresh(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """Ask the worker for the study's statistics now (when none are stored, or a queued refresh was
    lost)."""
    study = lead_study(request.user, study_id)
    if analysis_request(study_id=study.pk):
        messages.success(request, "The statistics are being computed: the dashboard reloads itself when they land.")
    else:
        messages.info(request, "A computation of the statistics is already waiting for the worker.")
    return redirect("annotation:dashboard", study_id=study.pk)


HELPED_PAGE_SIZE = 50


@require_GET
def helped_pairs(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The RQ4 candidates from the stored statistics, a page at a time, with their current tags."""
    study = lead_study(request.user, study_id)
    stored = stored_analysis(study, read=("helped",))
    raw = request.GET.get("page", "1")
    if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
        return invalid_parameter(request, f"'page' must be a positive number, got {raw[:40]!r}")
    number = int(raw)
    rules, mechanisms = study.rq4()
    rows = stored.helped
    shown = rows[(number - 1) * HELPED_PAGE_SIZE : number * HELPED_PAGE_SIZE]
    reasons = {concurrent: why for concurrent, _, why in shown}
    pairs = pair_outcomes(study=study, run_ids=list(reasons))
    tags = {t.run_id: t for t in AdvantageTag.objects.filter(study=study, run_id__in=list(reasons))}
    shown = [
        {"pair": pair, "reasons": reasons[pair.concurrent_run_id], "tag": tags.get(pair.concurrent_run_id)}
        for pair in sorted(pairs, key=lambda p: p.concurrent_run_id)
    ]
    context = {
        "study": study,
        "stored": stored,
        "rows": shown,
        "total": len(rows),
        "number": number,
        "previous": number - 1 if number > 1 else None,
        "next": number + 1 if number * HELPED_PAGE_SIZE < len(rows) else None,
        "mechanisms": mechanisms,
        # the study's rules now: when they changed after these candidates were computed, the status
        # line above says the figures are not current until the worker has recomputed them
        "rules": rules.descriptions(),
    }
    return render(request, "annotation/helped_pairs.html", context)


@require_POST
def helped_pair_tag(request: HtmxHttpRequest, study_id: int, run_id: int) -> HttpResponse:
    study = lead_study(request.user, study_id)
    rules, tags = study.rq4()
    if not any(concurrency_helped(pair, rules) for pair in pair_outcomes(study=study, run_ids=[run_id])):
        raise Http404("That run is not a pair where concurrency helped.")
    mechanism = request.POST.get("mechanism", "")
    if mechanism not in dict(tags):
        messages.error(request, "Choose a mechanism.")
    else:
        advantage_tag(study=study, run_id=run_id, mechanism=mechanism, note=request.POST.get("note", ""),
                      actor=request.user)  # fmt: skip
        messages.success(request, "Tagged.")
    return redirect("annotation:helped_pairs", study_id=study.pk)


@require_http_methods(["GET", "POST"])
def analysis_settings(request: HtmxHttpRequest, study_id: int) -> HttpResponse:
    """The study's analysis settings (κ's code universe, RQ4's rules and mechanism tags, the hint policy): for its
    adjudicator and admins. A refused value names its field and nothing is stored (422)."""
    study = lead_study(request.user, study_id)
    form = AnalysisSettingsForm.for_study(study, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            changed = study_analysis_update(study=study, kappa_universe=data["kappa_universe"], rules=data["rules"],
                                            tags=data["tags"], hint_policy=data["hint_policy"] or None,
                                            actor=request.user)  # fmt: skip
        except SettingsError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            names = {"kappa_universe": "κ's code universe", "rq4_rules": "RQ4's rules", "mechanisms": "mechanism tags",
                     "hint_policy": "the hint policy"}  # fmt: skip
            said = ", ".join(names[name] for name in changed)
            if set(changed) - {"mechanisms", "hint_policy"}:
                messages.success(
                    request, f"Saved: {said}. The statistics are recomputed: this page says when they land."
                )
            elif changed:
                messages.success(request, f"Saved: {said}.")
            else:
                messages.info(request, "Nothing changed.")
            if request.htmx:  # the form was posted in place: the browser goes to the dashboard
                return HttpResponseClientRedirect(reverse("annotation:dashboard", args=[study.pk]))
            return redirect("annotation:dashboard", study_id=study.pk)
    status = 422 if request.method == "POST" else 200
    template = "annotation/analysis_settings.html"
    return render(request, f"{template}#settings-form" if request.htmx else template, {"study": study, "form": form},
                  status=status)  # fmt: skip


@require_GET
def run_history(request: HtmxHttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """Everything recorded about one run in one study: for its adjudicator and admins."""
    study = lead_study(request.user, study_id)
    run = get_object_or_404(study.runs.select_related("task__benchmark", "agent"), pk=run_id)
    if blind_to_pair(request.user, run):  # they still code it (or its twin) in some study
        raise Http404("No such run of yours.")
    rows = history.run_history(study=study, run_id=run.pk)
    records = published_records_shown(study=study, run=run)
    context = {"study": study, "run": run, "rows": rows, "records": records}
    return render(request, "annotation/run_history.html", context)


@require_GET
def published_file(request: HtmxHttpRequest, study_id: int, run_id: int, record_id: int) -> HttpResponse:
    """One of the study's published files of a run's pair, as it was published (its text kept whole)."""
    study = lead_study(request.user, study_id)
    record = get_object_or_404(PublishedRecord, pk=record_id, study=study, run_id=run_id)
    media = "text/plain" if record.kind == PublishedRecord.Kind.ANNOTATION else "application/json"
    response = HttpResponse(record.text, content_type=f"{media}; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{KIND_FILES[record.kind]}"'
    return response


@require_GET
def study_export(request: HtmxHttpRequest, study_id: int, kind: str) -> StreamingHttpResponse:
    study = lead_study(request.user, study_id)
    if kind not in EXPORT_KINDS:
        raise Http404(f"No export named {kind!r}.")
    try:
        exported = export(study, kind)
    except NotComputed as exc:
        return HttpResponse(f"Not available yet: {exc}.", status=409, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(csv_lines(exported.rows, exported.columns), content_type="text/csv; charset=utf-8")
    name = f"study-{study.pk}-{kind}"
    if exported.statistics is not None:
        for header, value in statistics_headers(exported.statistics).items():
            response[header] = value
        name += statistics_file_suffix(exported.statistics)
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response
