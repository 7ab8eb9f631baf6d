"""Pages and exports at study scale (`make bench`): demo, paper and 10× the paper, in one database.

Builds three studies side by side (bench/study_scale.py: bulk inserts in the shapes the services
write): demo (14 tasks: 84 runs, 42 in the study), paper (354 tasks: 2,124 runs, 1,062 in the
study, 2,124 codings) and 10× the paper (3,540 tasks: 21,240 runs, 10,620 in the study, 21,240
codings); about a quarter of each study's runs discussed. Each study has its own annotators
(`<scale>-ann1..3`) and adjudicator (`<scale>-senior`), so the demo study is measured in a
database that also holds the 10× one. Then, through Django's test client, for each scale and
role: every page's server time (median of up to --repeat requests after one warm-up, at most
~5 s of requests per page) and its query count; every export's time to its first data row and
to its last byte. Prints one markdown table with the ratio 10× ÷ paper and what misses issue 17's
targets: every page < 200 ms at 10× (on PostgreSQL), 10× ÷ paper ≤ 1.5, exports' first row
< 100 ms. A page that answers anything but 200 is reported as such.

SQLite by default; BENCH_DATABASE_URL=postgres://… for PostgreSQL (the database is flushed;
--reuse keeps the studies a previous run built there). On PostgreSQL the database is vacuumed
and analysed before measuring, as autovacuum would leave it, and a statement that runs longer
than 60 s is cancelled (the page then answers 500, and the table says so).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.django_env import setup_django  # noqa: E402

setup_django("parallax-study-bench-")

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402

from annotation.analysis.store import analysis_refresh  # noqa: E402
from annotation.models import Assignment, Discussion, Study, StudyStatistics  # noqa: E402
from annotation.selectors.exports import EXPORT_KINDS  # noqa: E402
from bench.study_scale import SCALES, build_study  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402

BUDGET = 5.0  # seconds of requests per page and scale, after the warm-up
STATEMENT_TIMEOUT_MS = 60_000
PAGE_MS, RATIO, FIRST_ROW_MS = 200, 1.5, 100  # issue 17's targets
REFRESH_S, JOB_RATIO, BUNDLE_S = 3.0, 10, 30.0  # issue 29's targets for the worker's jobs
HEADINGS = {"demo": "demo", "paper": "paper", "10x": "10×"}


def _statement_timeout(sender, connection, **kwargs) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")


connection_created.connect(_statement_timeout)


def build(scales: list[str], *, reuse: bool) -> dict[str, Study]:
    if connection.vendor == "postgresql" and not reuse:
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # production static storage, as deployed
    codebook = codebook_load_default()
    studies = {}
    for key in scales:
        study = Study.objects.filter(name=f"bench {key}").first() if reuse else None
        if study is None:
            start = time.perf_counter()
            study = build_study(key=key, tasks=SCALES[key], codebook=codebook)
            built = f"built in {time.perf_counter() - start:.1f} s"
        else:
            built = "reused"
        study.refresh_from_db()
        if not StudyStatistics.objects.filter(study=study, version=study.statistics_version).exists():
            start = time.perf_counter()
            analysis_refresh(study_id=study.pk)  # the worker's job after the changes
            built += f"; statistics computed (the worker's refresh) in {time.perf_counter() - start:.1f} s"
        runs = study.runs.count()
        print(
            f"{key}: {runs * 2:,} runs, {runs:,} in the study, {Assignment.objects.filter(study=study).count():,} "
            f"codings, {study.discussions.count():,} discussions, {study.finals.count():,} finals — {built}"
        )
        studies[key] = study
    if connection.vendor == "postgresql":  # settled, as autovacuum leaves a database: planner statistics, visibility
        start = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE: {time.perf_counter() - start:.1f} s")
    return studies


@dataclass
class Sample:
    status: int
    seconds: float
    queries: int
    first_row: float | None = None  # exports: time to the first data row


def request(client: Client, url: str) -> Sample:
    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        response = client.get(url)
        first_row = None
        if response.status_code == 200 and response.streaming:
            chunks = iter(response.streaming_content)
            next(chunks, b"")  # the header line
            next(chunks, b"")  # the first data row
            first_row = time.perf_counter() - start
            for _ in chunks:
                pass
        elif response.streaming:
            b"".join(response.streaming_content)
        seconds = time.perf_counter() - start
    return Sample(response.status_code, seconds, len(queries), first_row)


def measure(client: Client, url: str, repeat: int) -> Sample:
    """The median of up to `repeat` requests after a warm-up, within BUDGET seconds (a request
    slower than that is measured once: its warm-up is the figure)."""
    warm = request(client, url)
    if warm.status != 200 or warm.seconds > BUDGET:
        return warm
    samples: list[Sample] = []
    while len(samples) < repeat and sum(s.seconds for s in samples) < BUDGET:
        samples.append(request(client, url))
    bad = [s for s in samples if s.status != 200]
    if bad:
        return bad[0]
    first_rows = [s.first_row for s in samples if s.first_row is not None]
    return Sample(
        200,
        statistics.median(s.seconds for s in samples),
        samples[-1].queries,
        statistics.median(first_rows) if first_rows else None,
    )


def targets(study: Study) -> list[tuple[str, str, str | None]]:
    """(page, role, url) for one study; url None when the study has no such object."""
    annotator = study.annotators.order_by("username").first()
    mine = Assignment.objects.filter(study=study, annotator=annotator)
    assignment = mine.order_by("pk").first()
    discussion = Discussion.objects.filter(study=study, run_id__in=mine.values("run_id")).order_by("pk").first()
    escalated = Discussion.objects.filter(study=study, status=Discussion.Status.ESCALATED).order_by("pk").first()
    discussed_run = discussion.run_id if discussion else None
    rows = [
        ("annotator's queue", "annotator", reverse("annotation:queue")),
        ("annotate page", "annotator", reverse("annotation:annotate", args=[assignment.pk])),
        ("discussion list", "annotator", reverse("annotation:discussions")),
        ("discussion page", "annotator", discussion and reverse("annotation:discussion", args=[discussion.pk])),
        ("adjudication queue", "adjudicator", reverse("annotation:adjudication_queue")),
        ("adjudicate page", "adjudicator", escalated and reverse("annotation:adjudicate", args=[escalated.pk])),
        ("study dashboard", "adjudicator", reverse("annotation:dashboard", args=[study.pk])),
        ("RQ4 helped pairs", "adjudicator", reverse("annotation:helped_pairs", args=[study.pk])),
        ("dashboard's status poll", "adjudicator", reverse("annotation:statistics_status", args=[study.pk])),
        ("study design page", "adjudicator", reverse("annotation:study_manage", args=[study.pk])),
        ("run list (their runs)", "annotator", reverse("trajectories:run_list")),
        ("run list (every run in the database)", "adjudicator", reverse("trajectories:run_list")),
        ("pair page", "annotator", reverse("trajectories:run_detail", args=[assignment.run_id])),
        ("pair page", "adjudicator", reverse("trajectories:run_detail", args=[assignment.run_id])),
        (
            "run history (a discussed run)",
            "adjudicator",
            discussed_run and reverse("annotation:run_history", args=[study.pk, discussed_run]),
        ),
    ]
    rows += [
        (f"export `{kind}.csv`", "adjudicator", reverse("annotation:export", args=[study.pk, kind]))
        for kind in EXPORT_KINDS
    ]
    rows.append(
        ("export `metrics.csv` (every run in the database)", "adjudicator", reverse("trajectories:metrics_csv"))
    )
    return rows


def measure_study(study: Study, repeat: int) -> dict[tuple[str, str], Sample | None]:
    clients = {}
    for role, user in (
        ("annotator", study.annotators.order_by("username").first()),
        ("adjudicator", study.adjudicator),
    ):
        clients[role] = Client(raise_request_exception=False)  # a 500 is a result, not the bench's crash
        clients[role].force_login(user)
    results = {}
    for page, role, url in targets(study):
        results[(page, role)] = measure(clients[role], url, repeat) if url else None
        sample = results[(page, role)]
        print(f"  {study.name}: {page} ({role}): " + (_cell(sample) if sample else "—"), file=sys.stderr)
    return results


def _cell(sample: Sample | None) -> str:
    if sample is None:
        return "—"
    if sample.status != 200:
        return f"**HTTP {sample.status}** after {_ms(sample.seconds)} / {sample.queries} q"
    if sample.first_row is not None:
        return f"{_ms(sample.first_row)} → {_ms(sample.seconds)} / {sample.queries} q"
    return f"{_ms(sample.seconds)} / {sample.queries} q"


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:,.1f} ms" if ms < 100 else f"{ms:,.0f} ms"


def misses(page: str, paper: Sample | None, big: Sample | None) -> tuple[str, list[str]]:
    """The 10× ÷ paper ratio (an export's: of its first row) and the targets the largest scale misses."""
    if big is None:
        return "—", []
    if big.status != 200:
        return "—", [f"HTTP {big.status}"]
    export = big.first_row is not None
    value = big.first_row if export else big.seconds
    found = []
    if export and value * 1000 >= FIRST_ROW_MS:
        found.append(f"first row ≥ {FIRST_ROW_MS} ms")
    if not export and value * 1000 >= PAGE_MS:
        found.append(f"≥ {PAGE_MS} ms")
    if paper is None or paper.status != 200:
        return "—", found
    ratio = value / (paper.first_row if export else paper.seconds)
    if not export and ratio > RATIO:
        found.append(f"ratio > {RATIO}")
    if not export and big.queries != paper.queries:
        found.append(f"queries {paper.queries} → {big.queries}")
    return f"{ratio:.2f}", found


def table(results: dict[str, dict], scales: list[str]) -> None:
    first = results[scales[0]]
    print("\n| page | role | " + " | ".join(HEADINGS[k] for k in scales) + " | 10× ÷ paper | misses (10×) |")
    print("| --- | --- | " + " | ".join("---:" for _ in scales) + " | ---: | --- |")
    for page, role in first:
        cells = [_cell(results[k].get((page, role))) for k in scales]
        paper, big = results.get("paper", {}).get((page, role)), results.get("10x", {}).get((page, role))
        ratio, found = misses(page, paper, big)
        print(
            f"| {page} | {role} | "
            + " | ".join(cells)
            + f" | {ratio} | {'**' + '; '.join(found) + '**' if found else ''} |"
        )
    print(
        "\nPages: median server time / queries. Exports: time to the first data row → to the last byte / queries;"
        " their ratio is of the first row. Targets (issue 17): a page < 200 ms at 10× on PostgreSQL, 10× ÷ paper"
        " ≤ 1.5 and the same query count, an export's first row < 100 ms."
    )


def worker_jobs(study: Study) -> dict[str, float]:
    """The worker's jobs on a study, timed: the statistics refresh (its read and its computation, median of 3) and
    the reproducibility bundle (refresh included, written to a temporary folder)."""
    import tempfile

    from annotation.analysis.compute import compute
    from annotation.analysis.inputs import read_inputs
    from annotation.models import StudyBundle
    from annotation.services.bundles import bundle_build, bundle_request

    reads, computes = [], []
    for _ in range(3):
        start = time.perf_counter()
        inputs = read_inputs(study)
        reads.append(time.perf_counter() - start)
        start = time.perf_counter()
        compute(inputs)
        computes.append(time.perf_counter() - start)
    times = {"read": statistics.median(reads), "compute": statistics.median(computes)}
    times["refresh"] = times["read"] + times["compute"]
    with tempfile.TemporaryDirectory() as media, override_settings(MEDIA_ROOT=media):
        bundle = bundle_request(study=study, actor=None, queue=False)
        start = time.perf_counter()
        bundle_build(bundle_id=bundle.pk)
        times["bundle"] = time.perf_counter() - start
        built = StudyBundle.objects.get(pk=bundle.pk)
        times["bundle_mb"] = (built.size or 0) / 1e6
        StudyBundle.objects.filter(pk=bundle.pk).delete()
    print(f"  {study.name}: worker jobs {times}", file=sys.stderr)
    return times


def jobs(results: dict[str, dict[str, float]], scales: list[str]) -> None:
    rows = (
        ("statistics: read the study", "read"),
        ("statistics: compute", "compute"),
        ("statistics refresh (read + compute)", "refresh"),
        ("reproducibility bundle (refresh included)", "bundle"),
    )
    print("\n| worker job | " + " | ".join(HEADINGS[k] for k in scales) + " | 10× ÷ paper | misses (10×) |")
    print("| --- | " + " | ".join("---:" for _ in scales) + " | ---: | --- |")
    for label, key in rows:
        cells = [f"{results[k][key]:.2f} s" for k in scales]
        paper, big = results.get("paper", {}).get(key), results.get("10x", {}).get(key)
        ratio = f"{big / paper:.1f}" if paper and big else "—"
        found = []
        if key == "refresh" and big is not None:
            found += [f"≥ {REFRESH_S} s"] * (big >= REFRESH_S) + [f"ratio > {JOB_RATIO}"] * bool(
                paper and big / paper > JOB_RATIO
            )
        if key == "bundle" and big is not None:
            found += [f"≥ {BUNDLE_S} s"] * (big >= BUNDLE_S)
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio} | {'**' + '; '.join(found) + '**' if found else ''} |")
    sizes = ", ".join(f"{HEADINGS[k]} {results[k]['bundle_mb']:.1f} MB" for k in scales)
    print(
        f"\nBundle sizes: {sizes}. Targets (issue 29): a 10× refresh < {REFRESH_S} s with 10× ÷ paper ≤ {JOB_RATIO}, "
        f"a 10× bundle < {BUNDLE_S} s. Seconds in this process (the worker's work, without its queue)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default=",".join(SCALES), help="comma-separated, of: " + ", ".join(SCALES))
    parser.add_argument("--repeat", type=int, default=5, help="requests per page (after a warm-up), at most")
    parser.add_argument("--reuse", action="store_true", help="keep the studies a previous run built (PostgreSQL)")
    parser.add_argument("--no-jobs", action="store_true", help="skip timing the worker's refresh and bundle")
    args = parser.parse_args()
    scales = [key for key in SCALES if key in args.scales.split(",")]
    studies = build(scales, reuse=args.reuse)
    print(
        f"\n{connection.vendor}, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, {User.objects.count()} users"
    )
    import sklearn.metrics  # noqa: F401 - loaded on the first agreement of a process; not measured here

    results = {key: measure_study(study, args.repeat) for key, study in studies.items()}
    table(results, scales)
    if not args.no_jobs:
        jobs({key: worker_jobs(study) for key, study in studies.items()}, scales)


if __name__ == "__main__":
    main()
