"""A study's reproducibility bundle: one zip from which every number on its dashboard can be
recomputed without Parallax (docs/reproduce_study.py does, and a test runs it).

Contents (docs/annotation.md lists the columns): the independent codings (each annotator's first
submission, what agreement is computed on) and the current, possibly revised ones, marked; the final
labels with provenance; a run × mode matrix; the pairs with both runs' outcomes; the codebook as a
data dictionary; study.json (seed, codebook version, app version, every parameter); dashboard.json
(the numbers Parallax shows, as the worker stored them); datapackage.json (a Frictionless descriptor of
every table); each table as CSV and as Parquet. Written a table at a time to a file (write_bundle): the
worker builds it (services/bundles.py) and the page offers it when ready."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from trajectories.exports import csv_lines

from ..analysis.agreement import LEVELS
from ..analysis.compute import BOOTSTRAP_RESAMPLES
from ..analysis.document import StudyAnalysis
from ..analysis.inputs import pair_metrics, pair_outcomes, submits
from ..analysis.reports import PROCESS_METRICS
from ..analysis.store import NotComputed, stored_analysis
from ..models import LABEL_FIELDS, AuditEntry, FinalCoding, Study, StudyBundle
from ..study_settings import CODE_UNIVERSES
from .exports import LABEL_COLUMNS, RQ1_METHODS, label_rows

INTEGER_METRICS = {"subagents_created", "peak_concurrency", "tokens", "shell_calls"}
LABEL_DETAIL = tuple((name, "integer" if name == "instance" else "string") for name in LABEL_FIELDS)


def _detail(fields: dict) -> dict:
    """Every field recorded for one instance of a mode, as the bundle writes it (a coding submitted
    before episodes were numbered is instance 1)."""
    return {
        name: int(fields.get(name) or 1) if kind == "integer" else _text(fields.get(name))
        for name, kind in LABEL_DETAIL
    }


# table name -> (columns with their Frictionless types, description)
TABLES: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {
    "independent_codings": (
        (
            ("run_id", "integer"),
            ("pair_key", "string"),
            ("annotator", "string"),
            ("submitted_at", "datetime"),
            ("hints_seen", "datetime"),
            ("no_failure", "boolean"),
            ("category", "string"),
            ("subcategory", "string"),
            ("mode", "string"),
            *LABEL_DETAIL,
        ),
        "Each annotator's first submission of each run (one row per mode instance; a 'no failure mode' coding is "
        "one row with an empty mode). Agreement is computed on these. hints_seen: when the annotator first showed "
        "the run's hints (empty: never); before submitted_at, the coding may have used them.",
    ),  # fmt: skip
    "current_codings": (
        tuple((name, "string") for name in (*LABEL_COLUMNS, "revised")),
        "The codings as they stand now, after any revision during discussion; revised = true where they "
        "differ from the independent coding.",
    ),
    "final_labels": (
        (
            ("run_id", "integer"),
            ("pair_key", "string"),
            ("agent", "string"),
            ("provenance", "string"),
            ("no_failure", "boolean"),
            ("decided_by", "string"),
            ("category", "string"),
            ("category_name", "string"),
            ("subcategory", "string"),
            ("subcategory_name", "string"),
            ("mode", "string"),
            ("mode_name", "string"),
            ("label_provenance", "string"),
            ("label_decided_by", "string"),
            ("count_agreed", "boolean"),
            *LABEL_DETAIL,
        ),
        "The study's final labels, one row per mode instance (a final 'no failure mode' is one row with an "
        "empty mode), with how each was reached. count_agreed = false: an episode beyond the count the coders "
        "agreed on (a final coding from before counts were compared); Table 3 leaves it out.",
    ),  # fmt: skip
    "run_code_matrix": ((), "One row per coded run, one 0/1 column per mode of the codebook (final labels)."),
    "pairs": (
        (
            ("pair_key", "string"),
            ("agent", "string"),
            ("benchmark", "string"),
            ("task_id", "string"),
            ("concurrent_run_id", "integer"),
            ("sequential_run_id", "integer"),
            ("concurrent_task_pass", "boolean"),
            ("sequential_task_pass", "boolean"),
            ("concurrent_test_pass", "number"),
            ("sequential_test_pass", "number"),
            ("concurrent_duration_s", "number"),
            ("sequential_duration_s", "number"),
            ("concurrent_tokens", "integer"),
            ("sequential_tokens", "integer"),
        ),
        "Every concurrent run of the study (coded or not) with its sequential twin (same task and agent) and both "
        "runs' outcomes.",
    ),  # fmt: skip
    "run_metrics": (
        (
            ("pair_key", "string"),
            ("agent", "string"),
            ("benchmark", "string"),
            ("difficulty", "string"),
            ("mode", "string"),
            *((name, "integer" if name in INTEGER_METRICS else "number") for name in PROCESS_METRICS),
        ),
        "The process metrics of each pair's two runs (concurrent and sequential): RQ2's input.",
    ),  # fmt: skip
    "codebook": (
        (
            ("level", "string"),
            ("key", "string"),
            ("name", "string"),
            ("parent", "string"),
            ("position", "integer"),
            ("definition", "string"),
            ("inclusion", "string"),
            ("exclusion", "string"),
        ),
        "The pinned codebook version as a data dictionary.",
    ),  # fmt: skip
}


def pair_key(run) -> str:
    return f"{run.task.benchmark.name}/{run.task.external_id}/{run.agent.name}"


def independent_rows(study: Study) -> Iterable[dict]:
    """Each annotation's first submission (its independent coding: the `after` snapshot of its first submit
    entry), a row per label, in run and slot order; read as plain values (a 10× study has ~21,000)."""
    codes = {c.key: c for c in study.codebook.codes.select_related("parent__parent")}
    first: dict[int, tuple] = {}
    entries = submits(study).values_list(
        "annotation_id",
        "annotation__assignment__run_id",
        "annotation__assignment__slot",
        "annotation__assignment__run__task__benchmark__name",
        "annotation__assignment__run__task__external_id",
        "annotation__assignment__run__agent__name",
        "annotation__assignment__annotator__username",
        "at",
        "annotation__hints_seen_at",
        "after",
    )
    for entry in entries:
        first.setdefault(entry[0], entry)
    for _, run_id, _, benchmark, task, agent, annotator, at, hints_seen, after in sorted(
        first.values(), key=lambda e: (e[1], e[2])
    ):
        base = {
            "run_id": run_id,
            "pair_key": f"{benchmark}/{task}/{agent}",
            "annotator": annotator,
            "submitted_at": at.isoformat(),
            # before submitted_at: this independent coding may have used the hints (a study shown them "always")
            "hints_seen": hints_seen.isoformat() if hints_seen else "",
            "no_failure": bool((after or {}).get("no_failure")),
        }
        labels = (after or {}).get("labels", [])
        if not labels:
            yield {**base, "mode": ""}
        for label in labels:
            code = codes[label["code"]]
            yield {
                **base,
                "category": code.parent.parent.key,
                "subcategory": code.parent.key,
                "mode": code.key,
                **_detail(label),
            }


def current_rows(study: Study) -> Iterable[dict]:
    revised = set(
        AuditEntry.objects.filter(annotation__assignment__study=study, action="revise").values_list(
            "annotation__assignment__run_id", "annotation__assignment__annotator__username"
        )
    )
    for row in label_rows(study):
        yield {**row, "revised": (row["run_id"], row["annotator"]) in revised}


def final_rows(study: Study) -> Iterable[dict]:
    finals = (
        FinalCoding.objects.filter(study=study)
        .select_related("run__agent", "run__task__benchmark", "decided_by")
        .prefetch_related("labels__code__parent__parent", "labels__nearest_rejected", "labels__decided_by")
        .order_by("run_id")
    )
    for final in finals:
        base = {
            "run_id": final.run_id,
            "pair_key": pair_key(final.run),
            "agent": final.run.agent.name,
            "provenance": final.provenance,
            "no_failure": final.no_failure,
            "decided_by": final.decided_by.get_username() if final.decided_by else "",
        }
        labels = sorted(final.labels.all(), key=lambda fl: (fl.code.position, fl.instance))
        if not labels:
            yield {**base, "mode": ""}
        for fl in labels:
            code = fl.code
            yield {
                **base,
                "category": code.parent.parent.key,
                "category_name": code.parent.parent.name,
                "subcategory": code.parent.key,
                "subcategory_name": code.parent.name,
                "mode": code.key,
                "mode_name": code.name,
                "label_provenance": fl.provenance,
                "label_decided_by": fl.decided_by.get_username() if fl.decided_by else "",
                "count_agreed": fl.count_agreed,
                **_detail(fl.content()),
            }


def pair_rows(study: Study) -> Iterable[dict]:
    for pair in pair_outcomes(study=study):
        yield {
            "pair_key": f"{pair.benchmark}/{pair.task}/{pair.agent}",
            "agent": pair.agent,
            "benchmark": pair.benchmark,
            "task_id": pair.task,
            "concurrent_run_id": pair.concurrent_run_id,
            "sequential_run_id": pair.sequential_run_id,
            "concurrent_task_pass": pair.concurrent_pass,
            "sequential_task_pass": pair.sequential_pass,
            "concurrent_test_pass": pair.concurrent_test_pass,
            "sequential_test_pass": pair.sequential_test_pass,
            "concurrent_duration_s": pair.concurrent_duration,
            "sequential_duration_s": pair.sequential_duration,
            "concurrent_tokens": pair.concurrent_tokens,
            "sequential_tokens": pair.sequential_tokens,
        }


def run_metric_rows(study: Study) -> Iterable[dict]:
    for run in pair_metrics(study=study):
        yield {
            "pair_key": f"{run.benchmark}/{run.task}/{run.agent}",
            "agent": run.agent,
            "benchmark": run.benchmark,
            "difficulty": run.difficulty,
            "mode": run.mode,
            **run.values,
        }


def codebook_rows(study: Study) -> Iterable[dict]:
    for code in study.codebook.codes.select_related("parent").order_by("position"):
        yield {
            "level": code.level,
            "key": code.key,
            "name": code.name,
            "parent": code.parent.key if code.parent else "",
            "position": code.position,
            "definition": code.definition,
            "inclusion": code.inclusion,
            "exclusion": code.exclusion,
        }


def matrix(study: Study, finals: list[dict]) -> tuple[tuple[tuple[str, str], ...], list[dict]]:
    modes = list(study.codebook.codes.filter(level="mode").order_by("position").values_list("key", flat=True))
    columns = (("run_id", "integer"), ("pair_key", "string"), ("agent", "string"), ("provenance", "string"))
    rows: dict[int, dict] = {}
    for final in finals:
        row = rows.setdefault(final["run_id"], {**{k: final[k] for k, _ in columns}, **dict.fromkeys(modes, 0)})
        if final.get("mode"):
            row[final["mode"]] = 1
    return (*columns, *((mode, "integer") for mode in modes)), list(rows.values())


def parameters(study: Study) -> dict:
    codebook = study.codebook
    rules, tags = study.rq4()
    return {
        "study": {"id": study.pk, "name": study.name, "created_at": study.created_at.isoformat()},
        "seed": study.seed,
        "codebook": {"name": codebook.name, "version": codebook.version, "status": codebook.status},
        "app": {"name": "Parallax", "version": settings.PARALLAX_VERSION},
        "exported_at": datetime.now(UTC).isoformat(),
        "annotators": sorted(study.annotators.values_list("username", flat=True)),
        "coders_per_run": study.coders_per_run,
        "hint_policy": study.hint_policy,
        "closed_at": study.closed_at.isoformat() if study.closed_at else None,
        "adjudicator": study.adjudicator.get_username(),
        "runs": study.runs.count(),
        "agreement": {
            "codings": "independent (each annotator's first submission)",
            "levels": list(LEVELS),
            "headline": "mean pairwise pooled Cohen's kappa at the mode level",
            "code_universe": study.kappa_universe,
            "code_universe_means": CODE_UNIVERSES[study.kappa_universe],
            "bootstrap": {
                "resamples": BOOTSTRAP_RESAMPLES,
                "seed": study.seed,
                "confidence": 0.95,
                "unit": "runs coded at least twice",
                "interval": "percentile",
            },
        },  # fmt: skip
        "table3": "final labels: one instance per (run, mode, episode)",
        "rq1": RQ1_METHODS,
        "rq2": "median, Q1, Q3 by linear interpolation (Hyndman-Fan type 7, numpy's default) per agent x "
        "benchmark x difficulty and mode, over the runs with the metric known",
        "rq4": {"rules": rules.as_dict(), "rule_descriptions": rules.descriptions(), "mechanisms": tags},
    }


def stored_document(study: Study) -> tuple[StudyAnalysis, dict]:
    """The study's analysis as the dashboard shows it — the document the worker stored, carried as it
    was stored — and where it came from (its version, when it was computed, whether it is current).
    Callers make it current first (the worker and the command do: analysis_refresh)."""
    stored = stored_analysis(study, read=("payload", "helped"))
    if stored.document is None:
        raise NotComputed(f"the statistics of {study} are not computed yet")
    statistics = stored.statistics
    return stored.document, {"stored": True, "version": statistics.version, "current": stored.current,
                             "computed_at": statistics.computed_at.isoformat()}  # fmt: skip


TABLE_BUILDERS = {
    "independent_codings": independent_rows,
    "current_codings": current_rows,
    "final_labels": final_rows,
    "pairs": pair_rows,
    "run_metrics": run_metric_rows,
    "codebook": codebook_rows,
}
BUNDLE_STEPS = len(TABLE_BUILDERS) + 2  # each table, the run × mode matrix, the JSON files


def write_bundle(study: Study, out: BinaryIO, *, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the study's bundle as a zip to `out`, a table at a time (each as CSV and Parquet), with the
    stored analysis as dashboard.json; `progress(done, total)` after each step. Returns the statistics
    version it carries. The analysis must be stored (stored_document)."""
    document, origin = stored_document(study)
    schemas = {name: columns for name, (columns, _) in TABLES.items()}
    done = 0
    # compression level 1: most of the bundle is text that deflates well at any level, and level 6 spent ~6 s of
    # a 10× study's bundle for a few percent of its size
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as bundle:

        def table(name: str, rows: list[dict]) -> None:
            nonlocal done
            columns = [column for column, _ in schemas[name]]
            with bundle.open(f"{name}.csv", "w") as text:
                for line in csv_lines(rows, tuple(columns)):
                    text.write(line.encode("utf-8"))
            bundle.writestr(f"{name}.parquet", _parquet(rows, schemas[name]))
            done += 1
            if progress:
                progress(done, BUNDLE_STEPS)

        finals: list[dict] = []
        for name, build in TABLE_BUILDERS.items():
            rows = list(build(study))
            if name == "final_labels":
                finals = rows
            table(name, rows)
        schemas["run_code_matrix"], rows = matrix(study, finals)
        table("run_code_matrix", rows)
        bundle.writestr("study.json", json.dumps({**parameters(study), "analysis": origin}, indent=2))
        bundle.writestr("dashboard.json", json.dumps(document.numbers(), indent=2, default=str))
        bundle.writestr("datapackage.json", json.dumps(_datapackage(study, schemas), indent=2))
        done += 1
        if progress:
            progress(done, BUNDLE_STEPS)
    return origin["version"]


def _text(value) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):  # cited spans: JSON
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _parquet(rows: list[dict], schema: tuple[tuple[str, str], ...]) -> bytes:
    import pandas as pd

    types = {"integer": "Int64", "number": "Float64", "boolean": "boolean", "string": "string", "datetime": "string"}
    frame = pd.DataFrame(
        [{column: row.get(column) for column, _ in schema} for row in rows], columns=[c for c, _ in schema]
    )
    for column, kind in schema:
        values = frame[column].map(lambda v: None if v == "" else v) if kind != "string" else frame[column]
        frame[column] = values.astype(types[kind]) if kind != "string" else values.map(_text).astype("string")
    out = io.BytesIO()
    frame.to_parquet(out, engine="pyarrow", index=False)
    return out.getvalue()


def _datapackage(study: Study, schemas: dict) -> dict:
    resources = []
    for name, schema in schemas.items():
        description = TABLES[name][1] if name in TABLES else ""
        for fmt in ("csv", "parquet"):
            resources.append(
                {
                    "name": f"{name.replace('_', '-')}-{fmt}",
                    "path": f"{name}.{fmt}",
                    "format": fmt,
                    "description": description,
                    "schema": {"fields": [{"name": column, "type": kind} for column, kind in schema]},
                }
            )
    return {
        "profile": "data-package",
        "name": f"parallax-study-{study.pk}",
        "title": f"Parallax study {study.name}",
        "resources": resources,
    }


def bundle_state(study: Study, *, study_version: int | None = None) -> dict:
    """What the page says of the study's bundles: the newest asked for (`latest`, any state), the newest
    ready to download (`ready`), and the study's statistics version now (a ready bundle built from an
    older one is said not to be current; given by a caller that has read it). One or two queries."""
    bundles = list(StudyBundle.objects.filter(study=study)[:KEEP_SHOWN])
    ready = next((b for b in bundles if bundle_file(b) is not None), None)
    version = study_version
    if version is None:
        version = Study.objects.filter(pk=study.pk).values_list("statistics_version", flat=True).first()
    return {"latest": bundles[0] if bundles else None, "ready": ready, "study_version": version}


KEEP_SHOWN = 5


def bundle_directory(study_id: int) -> Path:
    return Path(settings.MEDIA_ROOT) / "bundles" / f"study-{study_id}"


def bundle_file(bundle: StudyBundle) -> Path | None:
    """The finished bundle's zip on disk, or None (not finished, pruned, or its file gone)."""
    if bundle.status != StudyBundle.Status.DONE or not bundle.path:
        return None
    path = Path(settings.MEDIA_ROOT) / bundle.path
    return path if path.is_file() else None
