"""Export rows for a study: one generator per table, shared by the streamed CSV downloads and
the JSON API. Raw labels reveal everyone's coding: only the adjudicator and admins get them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from taxonomy.models import Code
from trajectories.exports import METRICS_COLUMNS, by_pk, metrics_rows
from trajectories.models import Run
from trajectories.selectors import twins

from ..analysis.inputs import pair_outcomes
from ..analysis.signatures import COLUMNS as SIGNATURE_COLUMNS
from ..analysis.signatures import evaluation_rows
from ..analysis.store import Stored, stored_section
from ..models import LABEL_FIELDS, AdvantageTag, Annotation, FinalCoding, Label, Study

LABEL_COLUMNS = (
    "study",
    "run_id",
    "benchmark",
    "task_id",
    "agent",
    "annotator",
    "status",
    "no_failure",
    "category",
    "subcategory",
    "mode",
    "path",
    *LABEL_FIELDS,
    "submitted_at",
    "updated_at",
    "hints_seen",
)
FINAL_COLUMNS = (
    "study",
    "run_id",
    "benchmark",
    "task_id",
    "agent",
    "provenance",
    "no_failure",
    "decided_by",
    "decided_at",
    "category",
    "subcategory",
    "mode",
    "path",
    "label_provenance",
    "label_decided_by",
    "count_agreed",
    *LABEL_FIELDS,
)
TABLE3_COLUMNS = ("level", "key", "name", "parent", "count", "percent")
AGREEMENT_COLUMNS = (
    "code_universe",
    "annotator_a",
    "annotator_b",
    "level",
    "n_shared_items",
    "pooled_kappa",
    "macro_kappa",
    "macro_n_codes",
    "n_codes_defined",
    "n_codes_undefined",
    "alpha_masi",
)
PER_CODE_COLUMNS = ("code_universe", "annotator_a", "annotator_b", "level", "code", "name", "kappa")
PAIRED_COLUMNS = (
    "n",
    "b",
    "c",
    "mcnemar_p",
    "mcnemar_p_holm",
    "task_pass_difference",
    "difference_ci_low",
    "difference_ci_high",
    "odds_ratio",
    "odds_ratio_ci_low",
    "odds_ratio_ci_high",
    "odds_ratio_midp_ci_low",
    "odds_ratio_midp_ci_high",
    "holm_family",
)
RQ1_COLUMNS = (
    "table",
    "agent",
    "benchmark",
    "pairs",
    "pairs_task_known",
    "pairs_test_known",
    "concurrent_task_pass",
    "sequential_task_pass",
    "concurrent_test_pass",
    "sequential_test_pass",
    *PAIRED_COLUMNS,
    "token_ratio",
    "time_ratio",
    "methods",
)
RQ1_METHODS = (
    "exact McNemar (two-sided binomial test of b of b+c); Holm within the table over the rows that can reach "
    "p <= 0.05 (b+c >= 6; holm_family rows; an empty mcnemar_p_holm: not in the family); difference (b-c)/n with "
    "Newcombe's method 10 95% interval (Wilson score, continuity-corrected phi); odds ratio b/c with exact "
    "Clopper-Pearson and mid-p 95% intervals (inf: c = 0; undefined: b + c = 0)"
)
RQ2_COLUMNS = (
    "agent",
    "benchmark",
    "difficulty",
    "metric",
    *(f"{mode}_{name}" for mode in ("concurrent", "sequential") for name in ("n", "median", "q1", "q3")),
    "quantile_method",
)
RQ4_COLUMNS = (
    "concurrent_run_id",
    "sequential_run_id",
    "benchmark",
    "task_id",
    "agent",
    "reasons",
    "mechanism",
    "mechanism_label",
    "note",
    "rules",
)


def _path(code) -> tuple[str, str, str, str]:
    sub, cat = code.parent, code.parent.parent
    return cat.key, sub.key, code.key, f"{cat.name} > {sub.name} > {code.name}"


FIRST_BATCH, RUN_BATCH = 25, 400  # runs per query when an export streams a study run by run


def _run_batches(study: Study) -> Iterator[list[int]]:
    """The study's run ids in order, a batch at a time: an export reads one batch per query, so its
    first row comes after one small query, not after the whole study was sorted. The batches
    start small (a quick first row) and double up to RUN_BATCH (few queries in all)."""
    ids = list(study.runs.order_by("pk").values_list("pk", flat=True))
    start, size = 0, FIRST_BATCH
    while start < len(ids):
        yield ids[start : start + size]
        start, size = start + size, min(size * 2, RUN_BATCH)


# What a labels row says of its coding and run (read as plain values: a 10× study has ~27,000 label rows)
_CODING_VALUES = (
    ("run_id", "assignment__run_id"),
    ("benchmark", "assignment__run__task__benchmark__name"),
    ("task_id", "assignment__run__task__external_id"),
    ("agent", "assignment__run__agent__name"),
    ("annotator", "assignment__annotator__username"),
    ("status", "status"),
    ("no_failure", "no_failure"),
    ("submitted_at", "submitted_at"),
    ("updated_at", "updated_at"),
    # When the annotator first showed the run's hints (empty: never): docs/annotation.md, "Hints".
    ("hints_seen", "hints_seen_at"),
)
_LABEL_VALUES = tuple(name for name in LABEL_FIELDS if name != "nearest_rejected")


def label_rows(study: Study) -> Iterator[dict]:
    """Every label of the study's codings, run by run (a batch of runs per query), then the codings with no
    label (no failure, or nothing picked yet)."""
    codes = _CodePaths()
    for runs in _run_batches(study):
        labels = (
            Label.objects.filter(annotation__assignment__study=study, annotation__assignment__run_id__in=runs)
            .order_by("annotation__assignment__run_id", "annotation__assignment__slot", "code__position", "instance")
            .values_list(
                *(f"annotation__{path}" for _, path in _CODING_VALUES), "code_id", "nearest_rejected_id", *_LABEL_VALUES
            )  # fmt: skip
        )
        for values in labels:
            yield _label_row(study, values, codes)
    empty = (
        Annotation.objects.filter(assignment__study=study, labels__isnull=True)
        .order_by("assignment__run_id", "assignment__slot")
        .values_list(*(path for _, path in _CODING_VALUES))
    )
    for values in empty:
        yield _label_row(study, values, codes)


class _CodePaths:
    """Codes by id with their category and subcategory, read when first met (a study's labels use its codebook's
    few dozen codes)."""

    def __init__(self) -> None:
        self.codes: dict[int, Code] = {}

    def __getitem__(self, pk: int) -> Code:
        if pk not in self.codes:
            self.codes[pk] = Code.objects.select_related("parent__parent").get(pk=pk)
        return self.codes[pk]


def _spans_text(spans: list) -> str:
    """Cited spans in one cell: JSON (they hold quotes, with any character), empty when there are none."""
    return json.dumps(spans, ensure_ascii=False) if spans else ""


def _label_row(study: Study, values: tuple, codes: _CodePaths) -> dict:
    coding = len(_CODING_VALUES)
    row = {"study": study.name, **{name: value for (name, _), value in zip(_CODING_VALUES, values, strict=False)}}
    if len(values) > coding:
        code_id, rejected_id, *content = values[coding:]
        content = dict(zip(_LABEL_VALUES, content, strict=True))
        cat, sub, mode, path = _path(codes[code_id])
        row.update(
            content,
            category=cat,
            subcategory=sub,
            mode=mode,
            path=path,
            evidence="; ".join(content["evidence"]),
            contrast="; ".join(content["contrast"]),
            spans=_spans_text(content["spans"]),
            nearest_rejected=codes[rejected_id].key if rejected_id else "",
        )
    return row


def final_rows(study: Study) -> Iterator[dict]:
    for runs in _run_batches(study):
        yield from _final_batch(study, runs)


def _final_batch(study: Study, runs: list[int]) -> Iterator[dict]:
    finals = (
        FinalCoding.objects.filter(study=study, run_id__in=runs)
        .select_related("run__agent", "run__task__benchmark", "decided_by")
        .prefetch_related("labels__code__parent__parent", "labels__nearest_rejected", "labels__decided_by")
        .order_by("run_id")
    )
    for final in finals:
        base = {
            "study": study.name,
            "run_id": final.run_id,
            "benchmark": final.run.task.benchmark.name,
            "task_id": final.run.task.external_id,
            "agent": final.run.agent.name,
            "provenance": final.provenance,
            "no_failure": final.no_failure,
            "decided_by": final.decided_by.get_username() if final.decided_by else "",
            "decided_at": final.decided_at,
        }
        labels = list(final.labels.all())
        if not labels:
            yield base
        for fl in labels:
            cat, sub, mode, path = _path(fl.code)
            content = fl.content()
            yield {
                **base,
                **content,
                "category": cat,
                "subcategory": sub,
                "mode": mode,
                "path": path,
                "label_provenance": fl.provenance,
                "label_decided_by": fl.decided_by.get_username() if fl.decided_by else "",
                "count_agreed": fl.count_agreed,
                "evidence": "; ".join(content["evidence"]),
                "contrast": "; ".join(content["contrast"]),
                "spans": _spans_text(content["spans"]),
                "nearest_rejected": content["nearest_rejected"] or "",
            }


def table3_rows(study: Study, table: dict) -> tuple[tuple[str, ...], Iterator[dict]]:
    agents = sorted(set(study.runs.values_list("agent__name", flat=True)))  # the table's share_by_agent keys
    columns = (*TABLE3_COLUMNS, *(f"share_{agent}" for agent in agents))

    def rows():
        for row in table["rows"]:
            out = {k: row[k] for k in TABLE3_COLUMNS}
            for agent in agents:
                out[f"share_{agent}"] = row["share_by_agent"][agent]
            yield out

    return columns, rows()


def _universe(report: dict, study: Study) -> str:
    """Which codes κ was computed over, as the agreement exports record it in every row."""
    return report.get("code_universe", {}).get("kind", study.kappa_universe)


def agreement_rows(study: Study, report: dict) -> Iterator[dict]:
    universe = _universe(report, study)
    for pair in report["pairs"]:
        a, b = pair["annotators"]
        for level, data in pair["levels"].items():
            yield {
                "code_universe": universe,
                "annotator_a": a,
                "annotator_b": b,
                "level": level,
                "n_shared_items": data["n_shared_items"],
                "pooled_kappa": data["pooled"]["kappa"],
                "macro_kappa": data["macro"]["kappa"],
                "macro_n_codes": data["macro"].get("n_codes"),
                "n_codes_defined": data["macro"]["n_codes_defined"],
                "n_codes_undefined": data["macro"]["n_codes_undefined"],
                "alpha_masi": data["alpha_masi"]["alpha"],
            }


def per_code_rows(study: Study, report: dict) -> Iterator[dict]:
    universe = _universe(report, study)
    for pair in report["pairs"]:
        a, b = pair["annotators"]
        for level, data in pair["levels"].items():
            for code, kappa in data["per_code_kappa"].items():
                yield {
                    "code_universe": universe,
                    "annotator_a": a,
                    "annotator_b": b,
                    "level": level,
                    "code": code,
                    "name": report["names"].get(code, code),
                    "kappa": kappa,
                }


def kappa_by_version_rows(study: Study, by_version: list[dict]) -> Iterator[dict]:
    """The headline κ per codebook version the study pinned (its codings against each)."""
    for row in by_version:
        yield {column: row[column] for column in KAPPA_BY_VERSION_COLUMNS}


def outcome_rows(study: Study) -> Iterator[dict]:
    """The study's runs, then their twins, one row of outcomes and metrics each."""
    runs = Run.objects.filter(studies=study)
    yield from metrics_rows(by_pk(runs.select_related("task__benchmark", "agent")))
    twin_ids = list(twins(runs=runs).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(twin_ids), 500):
        batch = Run.objects.filter(pk__in=twin_ids[start : start + 500]).select_related("task__benchmark", "agent")
        yield from metrics_rows(batch.order_by("pk"))


def rq1_rows(study: Study, rq1: dict) -> Iterator[dict]:
    """RQ1's two tables: a row per agent, then a row per agent × benchmark (Holm within each)."""
    for agent, row in rq1["agents"].items():
        yield {**_rq1_cells(row), "table": "agent", "agent": agent, "methods": RQ1_METHODS}
    for row in rq1["cells"]:
        yield {**_rq1_cells(row), "table": "agent x benchmark", "methods": RQ1_METHODS}


def _rq1_cells(row: dict) -> dict:
    """A row's values, an odds ratio that is no number said as such: `inf` when c = 0 (the ratio and its upper
    limits), `undefined` when there is no discordant pair."""
    out = {k: row.get(k) for k in RQ1_COLUMNS}
    state = row.get("odds_ratio_state")
    if state == "undefined":
        for key in ("odds_ratio", "odds_ratio_ci_low", "odds_ratio_ci_high", "odds_ratio_midp_ci_low",
                    "odds_ratio_midp_ci_high"):  # fmt: skip
            out[key] = "undefined"
    elif state == "infinite":
        for key in ("odds_ratio", "odds_ratio_ci_high", "odds_ratio_midp_ci_high"):
            out[key] = "inf"
    return out


def rq2_rows(study: Study, rq2: list[dict]) -> Iterator[dict]:
    for row in rq2:
        out = {k: row[k] for k in ("agent", "benchmark", "difficulty", "metric")}
        for mode in ("concurrent", "sequential"):
            out.update({f"{mode}_{name}": row[mode][name] for name in ("n", "median", "q1", "q3")})
        yield {**out, "quantile_method": "linear interpolation (Hyndman-Fan type 7, numpy default)"}


def rq4_rows(study: Study, helped: list[list], stored: Stored) -> Iterator[dict]:
    """The RQ4 candidates the worker found under the study's rules, with their tags and, in every row,
    the rules used; streamed a batch of pairs at a time (their outcomes and tags read per batch)."""
    rules, tags = study.rq4()
    document = stored.document
    used = document.settings.rq4_rules if document is not None and document.settings.rq4_rules else rules.as_dict()
    rules_text = json.dumps(used, sort_keys=True)
    labels = dict(tags)
    reasons = {concurrent: why for concurrent, _, why in helped}
    ordered = sorted(reasons)
    start, size = 0, FIRST_BATCH  # a small first batch: the first row whatever the study's size
    while start < len(ordered):
        batch = ordered[start : start + size]
        start, size = start + size, min(size * 2, RQ4_BATCH)
        tagged = {t.run_id: t for t in AdvantageTag.objects.filter(study=study, run_id__in=batch)}
        for pair in sorted(pair_outcomes(study=study, run_ids=batch), key=lambda p: p.concurrent_run_id):
            tag = tagged.get(pair.concurrent_run_id)
            yield {
                "concurrent_run_id": pair.concurrent_run_id,
                "sequential_run_id": pair.sequential_run_id,
                "benchmark": pair.benchmark,
                "task_id": pair.task,
                "agent": pair.agent,
                "reasons": "; ".join(reasons[pair.concurrent_run_id]),
                "mechanism": tag.mechanism if tag else "",
                "mechanism_label": labels.get(tag.mechanism, "") if tag else "",
                "note": tag.note if tag else "",
                "rules": rules_text,
            }


RQ4_BATCH = 500


def signature_rows(study: Study, evaluation: dict) -> Iterator[dict]:
    """The failure signatures against the final labels: detector × mode, detector and mode rows."""
    yield from evaluation_rows(evaluation)


@dataclass(frozen=True)
class Export:
    """An export's columns and its rows (a generator: streamed), and for a statistics export the stored
    analysis it reads (its version, whether it is current)."""

    columns: tuple[str, ...]
    rows: Iterator[dict]
    statistics: Stored | None = None


def statistics_headers(stored: Stored) -> dict[str, str]:
    """What a statistics export says of the figures it streams: their version, when they were computed,
    and whether they are current (the study has not changed since)."""
    statistics = stored.statistics
    return {
        "X-Parallax-Statistics-Version": str(statistics.version),
        "X-Parallax-Statistics-Computed-At": statistics.computed_at.isoformat(),
        "X-Parallax-Statistics-Current": "true" if stored.current else "false",
        "X-Parallax-Study-Version": str(stored.version),
    }


def statistics_file_suffix(stored: Stored) -> str:
    """The file name's part that says which figures it holds: `-v17`, `-v17-not-current`."""
    return f"-v{stored.statistics.version}" + ("" if stored.current else "-not-current")


# The statistics exports: each reads one section of the stored analysis (never computes in the request).
STATISTICS_EXPORTS = {
    "table3": "table3",
    "agreement": "agreement",
    "per-code-kappa": "agreement",
    "kappa-by-version": "by_version",
    "rq1": "rq1",
    "rq2": "rq2",
    "rq4": "helped",
    "signatures": "signatures",
}


def export(study: Study, kind: str) -> Export:
    """The rows of one export. A statistics export reads the stored analysis, current or not
    (analysis.store.NotComputed when there is none yet); the others stream the study's rows."""
    if kind == "labels":
        return Export(LABEL_COLUMNS, label_rows(study))
    if kind == "finals":
        return Export(FINAL_COLUMNS, final_rows(study))
    if kind == "outcomes":
        return Export(METRICS_COLUMNS, outcome_rows(study))
    if kind not in STATISTICS_EXPORTS:
        raise KeyError(kind)
    section, stored = stored_section(study, STATISTICS_EXPORTS[kind])
    if kind == "table3":
        columns, rows = table3_rows(study, section)
        return Export(columns, rows, stored)
    builders = {
        "agreement": (AGREEMENT_COLUMNS, agreement_rows),
        "per-code-kappa": (PER_CODE_COLUMNS, per_code_rows),
        "kappa-by-version": (KAPPA_BY_VERSION_COLUMNS, kappa_by_version_rows),
        "rq1": (RQ1_COLUMNS, rq1_rows),
        "rq2": (RQ2_COLUMNS, rq2_rows),
        "signatures": (SIGNATURE_COLUMNS, signature_rows),
    }
    if kind == "rq4":
        return Export(RQ4_COLUMNS, rq4_rows(study, section, stored), stored)
    columns, build = builders[kind]
    return Export(columns, build(study, section), stored)


EXPORT_KINDS = (
    "labels", "finals", "table3", "agreement", "per-code-kappa", "kappa-by-version", "outcomes", "rq1", "rq2", "rq4",
    "signatures",
)  # fmt: skip
KAPPA_BY_VERSION_COLUMNS = (
    "codebook_id", "codebook", "version", "current", "from", "to", "codings", "runs_compared", "kappa", "ci_low",
    "ci_high",
)  # fmt: skip
