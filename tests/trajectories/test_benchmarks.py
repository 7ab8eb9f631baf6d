"""One name per benchmark: the alias table, every import path, the filters, and the migration that
merged the rows stored under other spellings."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from tests.factories import FIXTURES, REAL, simple_run, write_jsonl
from trajectories.benchmarks import ALIASES, canonical_benchmark, merge_plan
from trajectories.models import AgentSystem, Benchmark, Run, Task
from trajectories.selectors import run_twin
from trajectories.services import import_paths

MIGRATION = importlib.import_module("trajectories.migrations.0008_benchmark_one_name")


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("swebench_verified", "SWE-bench Verified"),
        ("SWE-bench Verified", "SWE-bench Verified"),
        ("swe-bench-verified", "SWE-bench Verified"),
        ("  SWE-Bench_VERIFIED ", "SWE-bench Verified"),
        ("nl2repo", "NL2RepoBench"),
        ("NL2Repo", "NL2RepoBench"),
        ("NL2RepoBench", "NL2RepoBench"),
        ("loopsbench", "LoopsBench"),
        ("Loops-Bench", "LoopsBench"),
        ("repo_zero", "RepoZero"),
        ("programbench", "ProgramBench"),
    ],
)
def test_every_spelling_has_one_name(spelling, canonical):
    assert canonical_benchmark(spelling) == canonical


def test_other_benchmarks_keep_their_name():
    assert canonical_benchmark("SWE-bench") == "SWE-bench"  # the full SWE-bench is not Verified
    assert canonical_benchmark("  My   Bench ") == "My Bench"
    assert canonical_benchmark("unlabelled") == "unlabelled"
    assert canonical_benchmark("") == ""


def test_the_table_has_no_spelling_of_two_benchmarks():
    names = [canonical_benchmark(alias) for canonical, aliases in ALIASES.items() for alias in (canonical, *aliases)]
    assert sorted(set(names)) == sorted(ALIASES)


def test_merge_plan_lists_only_what_changes():
    plan = merge_plan(["swebench_verified", "SWE-bench Verified", "nl2repo", "LoopsBench", "Other"])
    assert plan == {"SWE-bench Verified": ["SWE-bench Verified", "swebench_verified"], "NL2RepoBench": ["nl2repo"]}


# -- every import path stores the one name --------------------------------------------------


@pytest.mark.django_db
def test_parallax_jsonl_headers_in_three_spellings_are_one_benchmark(tmp_path):
    for i, spelling in enumerate(("swebench_verified", "SWE-bench Verified", "swe-bench-verified")):
        lines = simple_run(f"t-{i}")
        lines[0]["task"]["benchmark"] = spelling
        write_jsonl(tmp_path / f"{i}.jsonl", lines)
    import_paths(paths=[tmp_path])
    assert list(Benchmark.objects.values_list("name", flat=True)) == ["SWE-bench Verified"]
    assert Task.objects.count() == 3


@pytest.mark.django_db
def test_a_pair_split_over_two_spellings_is_one_pair(tmp_path):
    for mode, spelling in (("concurrent", "loopsbench"), ("sequential", "LoopsBench")):
        lines = simple_run("t-pair", mode, n_sub=1 if mode == "concurrent" else 0)
        lines[0]["task"]["benchmark"] = spelling
        write_jsonl(tmp_path / f"{mode}.jsonl", lines)
    import_paths(paths=[tmp_path])
    concurrent = Run.objects.get(mode="concurrent")
    assert run_twin(run=concurrent) is not None and Task.objects.count() == 1


@pytest.mark.django_db
def test_the_corpus_tree_and_a_manifest_store_the_one_name(tmp_path):
    """Folder names (`swebench_verified/…/cell.json`) and a manifest's column go through the same writer."""
    import shutil

    shutil.copytree(FIXTURES / "corpus", tmp_path / "corpus")
    shutil.copytree(REAL / "kimi", tmp_path / "kimi")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(
        "path,benchmark,task_id,agent,mode\n"
        "kimi/server/events/*.jsonl,swe-bench-verified,other-task,Kimi Code,concurrent\n"
    )
    import_paths(paths=[tmp_path / "corpus"])
    import_paths(paths=[tmp_path / "kimi"], manifest=manifest)
    assert list(Benchmark.objects.values_list("name", flat=True)) == ["SWE-bench Verified"]


# -- filters -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_run_list_filter_takes_any_spelling(browser_client, tmp_path):
    lines = simple_run("t-1")
    lines[0]["task"]["benchmark"] = "nl2repo"
    import_paths(paths=[write_jsonl(tmp_path / "a.jsonl", lines)])
    body = browser_client.get(reverse("trajectories:run_list"), {"benchmark": "nl2repo"}).content.decode()
    assert "1 run" in body and "<option selected>NL2RepoBench</option>" in body
    api = browser_client.get("/api/runs/", {"benchmark": "NL2Repo"}).json()
    assert [r["benchmark"] for r in api["results"]] == ["NL2RepoBench"]


# -- the data migration ------------------------------------------------------------------------


def _task(benchmark: Benchmark, external_id: str, mode: str = "concurrent") -> Task:
    task = Task.objects.create(benchmark=benchmark, external_id=external_id)
    agent = AgentSystem.objects.get_or_create(name="Codex")[0]
    Run.objects.create(
        task=task, agent=agent, mode=mode, source_format="parallax", content_hash=f"{benchmark.pk}-{external_id}"
    )
    return task


@pytest.mark.django_db
def test_the_migration_merges_stored_spellings_and_keeps_every_task():
    canonical = Benchmark.objects.create(name="SWE-bench Verified")
    folder = Benchmark.objects.create(name="swebench_verified")
    nl2repo = Benchmark.objects.create(name="nl2repo")
    other = Benchmark.objects.create(name="Other")
    tasks = [_task(canonical, "a"), _task(folder, "b"), _task(folder, "c"), _task(nl2repo, "d"), _task(other, "e")]
    MIGRATION.merge_benchmarks(apps, None)
    assert dict(Benchmark.objects.values_list("name", "pk")) == {
        "SWE-bench Verified": canonical.pk,  # the row already named right is kept
        "NL2RepoBench": nl2repo.pk,  # renamed in place
        "Other": other.pk,
    }
    by_task = dict(Task.objects.values_list("external_id", "benchmark__name"))
    assert by_task == {"a": "SWE-bench Verified", "b": "SWE-bench Verified", "c": "SWE-bench Verified",
                       "d": "NL2RepoBench", "e": "Other"}  # fmt: skip
    assert Run.objects.count() == 5 and {t.pk for t in tasks} == set(Task.objects.values_list("pk", flat=True))
    MIGRATION.merge_benchmarks(apps, None)  # a second pass has nothing to do
    assert Benchmark.objects.count() == 3


@pytest.mark.django_db
def test_the_migration_refuses_two_tasks_of_one_id_and_changes_nothing():
    folder = Benchmark.objects.create(name="swebench_verified")
    header = Benchmark.objects.create(name="SWE-bench Verified")
    loops = Benchmark.objects.create(name="loopsbench")
    _task(folder, "django-1", "concurrent")
    _task(header, "django-1", "sequential")
    _task(loops, "x")
    before = list(Task.objects.values_list("pk", "benchmark_id").order_by("pk"))
    with pytest.raises(MIGRATION.BenchmarkMergeRefused, match=r"1 task id\(s\).*'django-1'.*Nothing was changed"):
        MIGRATION.merge_benchmarks(apps, None)
    assert list(Task.objects.values_list("pk", "benchmark_id").order_by("pk")) == before
    assert set(Benchmark.objects.values_list("name", flat=True)) == {
        "swebench_verified",
        "SWE-bench Verified",
        "loopsbench",
    }
