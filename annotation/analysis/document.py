"""A study's analysis as one document: what the dashboard shows, what the statistics exports write and
what the reproducibility bundle carries, computed once per version of the study's inputs
(compute.py) and stored as it was computed (store.py). Readers take its sections by name, with
their types, instead of digging in a JSON dict.

The sections' own shapes are those of the pure functions that build them (docs/agreement.md defines
every figure): `agreement` is analysis.agreement.agreement_report plus the headline's bootstrap, the
codebook's names and the code universe; `table3` analysis.reports.failure_mode_table; `rq1`
outcome_comparison; `rq2` process_summary's rows; `signatures` analysis.signatures.evaluate_signatures.

`SCHEMA` numbers the document's shape. A document stored by an older Parallax (a payload from before
a section existed) is read with the sections it lacks empty and named in `missing`; the pages show
what it has until the worker computes it again, at the study's next change or on *Compute now*."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

SCHEMA = 2  # 2: macro κ over common codes, Fleiss from the design, the headline CI's Monte Carlo error


@dataclass(frozen=True)
class AnalysisSettings:
    """The study's settings the document was computed with."""

    kappa_universe: str
    rq4_rules: dict[str, Any]
    rq4_rule_descriptions: list[str]


@dataclass(frozen=True)
class StudyAnalysis:
    strata: list[dict]  # per agent × benchmark: runs, runs coded by all k, runs with final labels
    agreement: dict  # pairs, levels, fleiss, alpha, headline (with its bootstrap CI), names, code_universe
    per_code: list[dict]  # each code's κ per annotator pair and their mean, weakest first
    over_time: list[dict]  # the headline κ as runs were completed: runs, at, kappa
    by_version: list[dict]  # the headline κ per codebook version the study pinned
    table3: dict  # the paper's Table 3 from the final labels
    rq1: dict  # concurrent against sequential outcomes, per agent and per agent × benchmark
    rq2: list[dict]  # process metrics, median and quartiles per agent × benchmark × difficulty
    agents: list[str]
    signatures: dict | None  # the detectors against the final labels
    settings: AnalysisSettings
    helped: list[list]  # RQ4's candidates: [concurrent run id, sequential run id, [reasons]], in run order
    schema: int = SCHEMA
    missing: tuple[str, ...] = field(default=(), compare=False)  # sections an older stored document lacked

    # -- as stored -------------------------------------------------------------------------------

    def payload(self) -> dict:
        """The document as JSON (without `helped`, stored beside it for the RQ4 page's paging)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("helped", "missing")}
        return jsonable(data)

    @classmethod
    def from_stored(cls, payload: dict, helped: list[list] | None) -> StudyAnalysis:
        names = [f.name for f in dataclasses.fields(cls) if f.name not in ("schema", "missing", "helped")]
        empty: dict[str, Any] = {
            **{name: [] for name in ("strata", "per_code", "over_time", "by_version", "rq2", "agents")},
            **{name: {} for name in ("agreement", "table3", "rq1")},
            "signatures": None,
        }
        missing = tuple(name for name in names if name not in payload)
        values = {name: payload.get(name, empty.get(name)) for name in names}
        settings = values.pop("settings") or {}
        return cls(
            **values,
            settings=AnalysisSettings(
                kappa_universe=settings.get("kappa_universe", "codebook"),
                rq4_rules=settings.get("rq4_rules", {}),
                rq4_rule_descriptions=settings.get("rq4_rule_descriptions", []),
            ),
            helped=helped or [],
            schema=int(payload.get("schema") or 0),
            missing=missing,
        )

    def numbers(self) -> dict:
        """What the reproducibility bundle's dashboard.json holds: the document as stored, with RQ4's
        candidates under `rq4` (docs/reproduce_study.py recomputes each figure from the tables)."""
        return {**self.payload(), "rq4": jsonable(self.helped)}


def jsonable(value):
    """Plain JSON: tuples as lists, dataclasses as dicts, dates as ISO text, NaN and ±∞ as null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        return jsonable(value.item())
    return value
