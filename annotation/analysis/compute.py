"""A study's analysis computed from its inputs (inputs.py): pure, no database. `compute` builds the
whole document; each section has a function of its own, which the exports call on the parts of the
inputs they need when the stored document is not current."""

from __future__ import annotations

from collections import Counter

from .agreement import LEVELS, agreement_report, count_agreement, headline_bootstrap, headline_series
from .document import AnalysisSettings, StudyAnalysis, jsonable
from .inputs import StudyInputs
from .reports import concurrency_helped, failure_mode_table, outcome_comparison, process_summary
from .signatures import evaluate_signatures

BOOTSTRAP_RESAMPLES = 10_000  # the headline κ's CI, as the dashboard shows it (its Monte Carlo error beside it)
OVER_TIME_POINTS = 10


def compute(inputs: StudyInputs, *, resamples: int = BOOTSTRAP_RESAMPLES) -> StudyAnalysis:
    """Every figure of the study's analysis, from one read of its inputs."""
    report = agreement(inputs, resamples=resamples)
    headline = report["headline"]
    return StudyAnalysis(
        strata=jsonable(inputs.strata),
        agreement=jsonable(report),
        per_code=per_code_kappa(report),
        over_time=jsonable(kappa_over_time(inputs)),
        by_version=jsonable(kappa_by_version(inputs, resamples=resamples, current=headline)),
        table3=jsonable(table3(inputs)),
        rq1=jsonable(outcome_comparison(inputs.pairs)),
        rq2=jsonable(process_summary(inputs.metrics)),
        agents=list(inputs.agents),
        signatures=jsonable(signatures(inputs)),
        settings=AnalysisSettings(
            kappa_universe=inputs.kappa_universe,
            rq4_rules=inputs.rq4_rules.as_dict(),
            rq4_rule_descriptions=inputs.rq4_rules.descriptions(),
        ),
        helped=helped_pairs(inputs),
    )


def agreement(inputs: StudyInputs, *, resamples: int = BOOTSTRAP_RESAMPLES) -> dict:
    """The agreement report with the headline's bootstrap CI, the codes' names and the code universe."""
    taxonomy, codings = inputs.taxonomy, inputs.codings
    report = agreement_report(taxonomy, codings, raters=inputs.coders_per_run)
    report["headline"] = headline_bootstrap(taxonomy, codings, n_resamples=resamples, seed=inputs.seed)
    report["counts"] = count_agreement(codings)  # on the episode counts Table 3 adds up
    report["names"] = dict(inputs.names)
    report["code_universe"] = {
        "kind": inputs.kappa_universe,
        "label": inputs.universe_label,
        "codes": {level: len(taxonomy.universe(level)) for level in LEVELS},
    }
    return report


def per_code_kappa(report: dict) -> list[dict]:
    """Each code's κ per annotator pair (mode level) and their mean, weakest first."""
    mode_pairs = [p for p in report["pairs"] if p["levels"]["mode"]["n_shared_items"]]
    rows = []
    for key, name in report["names"].items():
        if any(key in p["levels"]["mode"]["per_code_kappa"] for p in mode_pairs):
            values = [p["levels"]["mode"]["per_code_kappa"].get(key) for p in mode_pairs]
            defined = [v for v in values if v is not None]
            rows.append({"key": key, "name": name, "values": values,
                         "mean": sum(defined) / len(defined) if defined else None})  # fmt: skip
    rows.sort(key=lambda r: (r["mean"] is None, r["mean"] if r["mean"] is not None else 0))
    return rows


def kappa_over_time(inputs: StudyInputs, *, points: int = OVER_TIME_POINTS) -> list[dict]:
    """The headline κ over the runs compared so far — coded independently by two annotators at least, in the
    order they were (their second first submission) — at even steps; the last step is every run compared,
    so it is the headline."""
    completed = sorted((times[1], item) for item, times in inputs.submitted_at.items() if len(times) >= 2)
    if not completed:
        return []
    steps = sorted({max(1, round(len(completed) * j / points)) for j in range(1, points + 1)})
    values = headline_series(
        inputs.taxonomy, inputs.codings, item_order=[item for _, item in completed], checkpoints=steps
    )
    return [{"runs": n, "at": completed[n - 1][0], "kappa": value} for n, value in zip(steps, values, strict=True)]


def kappa_by_version(
    inputs: StudyInputs, *, resamples: int = BOOTSTRAP_RESAMPLES, current: dict | None = None
) -> list[dict]:
    """The headline κ (mode level, mean pairwise pooled, with its bootstrap CI) of each codebook
    version the study has pinned, over the codings submitted against it (`current`: the headline of the
    version pinned now, when the caller has it — it is the same computation)."""
    rows = []
    for version in inputs.versions:
        if version.current and current is not None:
            headline = current
        else:
            headline = headline_bootstrap(version.taxonomy, version.codings, n_resamples=resamples, seed=inputs.seed)
        per_item = Counter(c.item for c in version.codings)
        rows.append(
            {
                "codebook_id": version.codebook_id,
                "codebook": version.codebook,
                "version": version.version,
                "current": version.current,
                "from": version.start,
                "to": version.end,
                "codings": len(version.codings),
                "runs_compared": sum(1 for n in per_item.values() if n >= 2),
                "kappa": headline["kappa"],
                "ci_low": headline["ci_low"],
                "ci_high": headline["ci_high"],
            }
        )
    return rows


def table3(inputs: StudyInputs) -> dict:
    """The study's Table 3: failure-mode instances per category, subcategory and mode, with how many
    runs have final labels and how many final episodes it leaves out (their count was not agreed)."""
    table = failure_mode_table(inputs.instances, agents=inputs.agents, runs_total=inputs.runs_total)
    return {**table, "runs_final": inputs.runs_final, "instances_not_agreed": inputs.instances_not_agreed}


def signatures(inputs: StudyInputs) -> dict:
    """Precision and recall of every detector, detector × mode and mode against the study's final
    labels, with the counts and how many runs were left out (docs/signatures.md)."""
    evaluation = evaluate_signatures(
        inputs.signature_runs, detector_modes=inputs.detector_modes, codebook_modes=inputs.codebook_modes
    )
    # The same over the runs whose gold was reached with no hint seen (incorporation bias: the hints are
    # these detectors' hits), side by side with the figures over every run.
    free = evaluate_signatures(
        [run for run in inputs.signature_runs if run.hint_free],
        detector_modes=inputs.detector_modes,
        codebook_modes=inputs.codebook_modes,
    )
    for table in ("detectors", "modes", "detector_modes"):
        beside = {_row_key(row): row for row in free[table]}
        for row in evaluation[table]:
            other = beside.get(_row_key(row), {})
            row["hint_free"] = {name: other.get(name) for name in ("tp", "fp", "fn", "tn", "precision", "recall")}
    return {**evaluation, "detector_version": inputs.detector_version, "hint_free_runs": free["runs"]}


def _row_key(row: dict) -> tuple:
    return row.get("detector"), row.get("mode")


def helped_pairs(inputs: StudyInputs) -> list[list]:
    """The RQ4 candidates, compact (the page reads each one's outcomes when it shows it):
    [concurrent run id, sequential run id, [reasons]]."""
    return [
        [pair.concurrent_run_id, pair.sequential_run_id, reasons]
        for pair in sorted(inputs.pairs, key=lambda p: p.concurrent_run_id)
        if (reasons := concurrency_helped(pair, inputs.rq4_rules))
    ]
