"""A study's statistics, computed once per change by the worker (services/statistics.py) and read
back by the dashboard, the RQ4 page and the κ/Table 3 exports: never computed on a page view.

`compute_statistics` gathers everything the dashboard shows from the study's rows (selectors/
dashboard.py and the pure stats modules) as one JSON document; `stored_statistics` reads the last
one back and says whether it is current (computed from the study's latest inputs)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import date, datetime

from ..models import Study, StudyStatistics
from ..stats.reports import PairOutcome, Rq4Rules, concurrency_helped, outcome_comparison, process_summary
from . import dashboard
from .signatures import signature_evaluation

BOOTSTRAP_RESAMPLES = 1000  # the headline κ's CI, as the dashboard shows it


def _jsonable(value):
    """Plain JSON: tuples as lists, dataclasses as dicts, dates as ISO text, NaN and ±∞ as null."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        return _jsonable(value.item())
    return value


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


def compute_statistics(study: Study) -> tuple[dict, list[list]]:
    """Everything the dashboard and the κ/Table 3/RQ1/RQ2/signatures exports show, from the study's rows, and
    the RQ4 candidates (helped_pairs) under the study's rules; `settings` records the settings they
    were computed with."""
    inputs = dashboard.agreement_input(study=study)  # read once, for the report and κ over time
    report = dashboard.agreement(study=study, resamples=BOOTSTRAP_RESAMPLES, inputs=inputs)
    pairs = dashboard.pair_outcomes(study=study)
    rules, _ = study.rq4()
    return _jsonable(
        {
            "strata": dashboard.strata(study=study),
            "agreement": report,
            "per_code": per_code_kappa(report),
            "over_time": dashboard.kappa_over_time(study=study, inputs=inputs),
            "by_version": dashboard.agreement_by_version(study=study, resamples=BOOTSTRAP_RESAMPLES),
            "table3": dashboard.study_failure_modes(study=study),
            "rq1": outcome_comparison(pairs),
            "rq2": process_summary(dashboard.pair_metrics(study=study)),
            "agents": sorted(set(study.runs.values_list("agent__name", flat=True))),
            "signatures": signature_evaluation(study=study),
            "settings": {
                "kappa_universe": study.kappa_universe,
                "rq4_rules": rules.as_dict(),
                "rq4_rule_descriptions": rules.descriptions(),
            },
        }
    ), helped_pairs(pairs, rules)


def helped_pairs(pairs: list[PairOutcome], rules: Rq4Rules) -> list[list]:
    """The RQ4 candidates, compact (the page reads each one's outcomes when it shows it):
    [concurrent run id, sequential run id, [reasons]]."""
    return [
        [pair.concurrent_run_id, pair.sequential_run_id, reasons]
        for pair in sorted(pairs, key=lambda p: p.concurrent_run_id)
        if (reasons := concurrency_helped(pair, rules))
    ]


@dataclass(frozen=True)
class Stored:
    """The stored statistics of a study and whether they are current."""

    statistics: StudyStatistics | None
    version: int  # the study's current inputs version
    queued: bool  # a refresh is waiting for the worker

    @property
    def current(self) -> bool:
        return self.statistics is not None and self.statistics.version >= self.version

    @property
    def payload(self) -> dict | None:
        return self.statistics.payload if self.statistics is not None else None

    @property
    def helped(self) -> list[list]:
        return self.statistics.helped if self.statistics is not None else []


def stored_statistics(study: Study, *, read: tuple[str, ...] = ("payload",)) -> Stored:
    """The last statistics computed for the study — of its two documents, only those in `read`
    (`payload`, `helped`) — and the study's inputs version read fresh (not from a possibly older
    instance). Two queries."""
    qs = StudyStatistics.objects.filter(study_id=study.pk).defer(*({"payload", "helped"} - set(read)))
    version, queued_at = (
        Study.objects.filter(pk=study.pk).values_list("statistics_version", "statistics_queued_at").get()
    )
    return Stored(statistics=qs.first(), version=version, queued=queued_at is not None)
