"""Pages, exports and agreement on a full study (`make bench`), in one fresh database.

Builds: the paper corpus (2,124 runs) plus the giant pair (320 sub-agents, ~225k events),
the study codebook, a study over every pair (1,063 concurrent runs, each assigned to two of
three annotators) and both codings of every run submitted through the real services
(`simulate_codings`, synthetic labels). Then measures, through Django's test client:
  * run page and annotate page: server time (median of 30) and queries, largest run vs smallest
    (target: ratio ≤ 1.5, same query count);
  * every CSV export: time to the first byte and to the last, and size (target: first byte < 1 s);
  * agreement for the whole study from the database (target ≤ 1 s).
SQLite by default; BENCH_DATABASE_URL=postgres://… for PostgreSQL (the database is flushed).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.django_env import setup_django  # noqa: E402

setup_django("parallax-page-bench-")

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from accounts.roles import ADJUDICATOR, ANNOTATOR  # noqa: E402
from annotation.analysis import compute  # noqa: E402
from annotation.analysis.agreement import agreement_report  # noqa: E402
from annotation.analysis.inputs import independent_codings, read_inputs  # noqa: E402
from annotation.models import Assignment  # noqa: E402
from annotation.selectors.exports import EXPORT_KINDS  # noqa: E402
from annotation.services.studies import study_assign, study_create  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402
from trajectories.models import Run  # noqa: E402
from trajectories.services import import_paths  # noqa: E402

OUT = ROOT / "var" / "bench"


def build():
    if connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # production static storage, as deployed
    corpus, giant = OUT / "corpus-paper", OUT / "giant-320"
    if not corpus.exists():
        call_command("generate_corpus", scale="paper", seed=1, out=corpus)
    if not (giant / "giant.jsonl").exists():
        from bench.make_giant import write_giant

        write_giant(giant / "giant.jsonl", subagents=320, events_per_agent=700, text_bytes=120)
    start = time.perf_counter()
    report = import_paths(paths=[corpus, giant])
    assert report.count("imported") == 2126, [r.message for r in report.results if r.status != "imported"][:3]
    users = []
    for name, role in (("ann1", ANNOTATOR), ("ann2", ANNOTATOR), ("ann3", ANNOTATOR), ("senior", ADJUDICATOR)):
        user = User.objects.create_user(name, password="x")
        user.groups.add(Group.objects.get_or_create(name=role)[0])  # flush (PostgreSQL) empties it
        users.append(user)
    study = study_create(name="bench", codebook=codebook_load_default(), annotators=users[:3], adjudicator=users[3])
    study_assign(study=study)
    call_command("simulate_codings", str(study.pk), fraction=1.0, verbosity=0)
    print(f"built: {Run.objects.count():,} runs, {study.runs.count():,} in the study, all coded "
          f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
    return study, users


def server_time(client: Client, url: str, repeat: int = 30) -> tuple[float, int]:
    client.get(url)  # warm caches (templates, sessions)
    times = []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(queries)


def pages(study, users) -> None:
    runs = list(study.runs.order_by("-n_events"))
    largest, smallest = runs[0], runs[-1]
    admin = Client()
    admin.force_login(users[3])
    rows = []
    for label, run in (("largest", largest), ("smallest", smallest)):
        seconds, queries = server_time(admin, f"/trajectories/runs/{run.pk}/")
        rows.append(("run page", label, run, seconds, queries))
    for label, run in (("largest", largest), ("smallest", smallest)):
        assignment = Assignment.objects.filter(study=study, run=run).select_related("annotator").first()
        client = Client()
        client.force_login(assignment.annotator)
        seconds, queries = server_time(client, f"/annotate/{assignment.pk}/")
        rows.append(("annotate page", label, run, seconds, queries))
    print("| page | run | sub-agents | events | server time (median of 30) | queries |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for page, label, run, seconds, queries in rows:
        print(f"| {page} | {label} | {run.n_contexts - 1:,} | {run.n_events:,} | {seconds * 1000:.1f} ms | {queries} |")
    for page in ("run page", "annotate page"):
        big, small = [r for r in rows if r[0] == page]
        print(
            f"{page}: largest ÷ smallest = {big[3] / small[3]:.2f} (target ≤ 1.5), "
            f"queries {big[4]} vs {small[4]} (target: equal)"
        )


def exports(study, users) -> None:
    client = Client()
    client.force_login(users[3])
    urls = [f"/annotate/studies/{study.pk}/export/{kind}.csv" for kind in EXPORT_KINDS]
    urls.append("/trajectories/metrics.csv")
    print("| export | first byte (header) | first data row | last byte | size |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for url in urls:
        reset_queries()
        start = time.perf_counter()
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        chunks = iter(response.streaming_content)
        size = len(next(chunks))
        first = time.perf_counter() - start
        size += len(next(chunks))
        row = time.perf_counter() - start
        size += sum(len(chunk) for chunk in chunks)
        last = time.perf_counter() - start
        print(
            f"| `{url.rsplit('/', 1)[-1]}` | {first * 1000:.0f} ms | {row * 1000:.0f} ms | {last * 1000:.0f} ms "
            f"| {size / 1024:,.0f} KiB |"
        )


def agreement(study) -> None:
    start = time.perf_counter()
    taxonomy, codings, _ = independent_codings(study=study)
    report = agreement_report(taxonomy, codings)
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    compute.agreement(read_inputs(study, parts=("agreement",)), resamples=1000)
    with_ci = time.perf_counter() - start
    print(
        f"agreement from the database, {study.runs.count():,} runs × {len(codings) / study.runs.count():.0f} "
        f"codings, all levels: {elapsed:.2f} s (target ≤ 1 s); with the 1,000-resample CI, as the dashboard "
        f"shows it: {with_ci:.2f} s; headline κ {report['overall']['mode']['mean_pairwise_pooled_kappa']:.3f}"
    )


def main() -> None:
    study, users = build()
    print(f"\n{connection.vendor}, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs")
    # scikit-learn (κ) loads on first use, not at start-up (it would add ~70 MB to every web
    # process): the first agreement of a process pays for it once. Measured here, then warm.
    start = time.perf_counter()
    import sklearn.metrics  # noqa: F401

    print(f"one-off: loading scikit-learn on the first agreement of a process: {time.perf_counter() - start:.2f} s")
    pages(study, users)
    exports(study, users)
    agreement(study)


if __name__ == "__main__":
    main()
