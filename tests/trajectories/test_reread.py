"""A run stored by an older Parallax is read again in place (`import_trajectories --replace`): what its
files give is replaced — agents, events, files, tests, metrics — and the run, with every assignment and
coding of it, stays. Built on the study's Kimi Code cell of django__django-10999 (tests/conftest.py
ARTIFACT), first imported as an older Parallax saw it: without its agent's wire.jsonl, read from the
server journal alone, so without a word the agent wrote."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Study
from annotation.services.studies import study_assign, study_create
from tests.conftest import ARTIFACT
from trajectories.models import AgentContext, Event, Run, RunFile
from trajectories.selectors import run_twin
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

CELL = ARTIFACT / "swebench_verified" / "django__django-10999" / "kimi" / "parallel"
if not CELL.is_dir():
    pytest.skip(f"the study's task folder is not at {ARTIFACT}", allow_module_level=True)


@pytest.fixture
def older(tmp_path):
    """The pair imported with the parallel cell's wire file missing, then the wire file put back: the
    folder as it is now, and the stored concurrent run as an older Parallax read it."""
    pair = tmp_path / "swebench_verified" / "django__django-10999" / "kimi"
    shutil.copytree(CELL.parent / "serial", pair / "serial")
    shutil.copytree(CELL, pair / "parallel")
    wire = next((pair / "parallel").rglob("wire.jsonl"))
    kept = wire.read_bytes()
    wire.unlink()
    results = import_paths(paths=[tmp_path]).results
    assert [r.status for r in results] == ["imported", "imported"], results
    wire.write_bytes(kept)
    return tmp_path, Run.objects.get(mode="concurrent")


def wire_parts(kind: str) -> int:
    wire = next(CELL.rglob("wire.jsonl"))
    events = [json.loads(line) for line in wire.read_text().splitlines() if line.strip()]
    return sum(
        1
        for e in events
        if e["type"] == "context.append_loop_event"
        and e["event"]["type"] == "content.part"
        and e["event"]["part"]["type"] == kind
    )


def test_without_replace_the_stored_run_is_refused_and_says_how(older):
    folder, run = older
    result = next(r for r in import_paths(paths=[folder]).results if r.status != "duplicate")
    assert result.status == "failed" and result.run_id == run.pk
    assert "import with --replace to read it again" in result.message


def test_replace_reads_the_run_again_in_place_and_keeps_its_codings(older, codebook, trio, adjudicator):
    folder, run = older
    assert Event.objects.filter(run=run, kind="reasoning").count() == 0  # the older reading: no words
    study = study_create(name="S", codebook=codebook, annotators=trio, adjudicator=adjudicator, run_ids=[run.pk])
    study_assign(study=study)
    assigned = set(Assignment.objects.filter(run=run).values_list("pk", flat=True))
    version = Study.objects.get(pk=study.pk).statistics_version

    results = import_paths(paths=[folder], replace=True).results

    assert {(r.status, r.run_id) for r in results} == {("replaced", run.pk), ("replaced", run_twin(run=run).pk)}
    fresh = Run.objects.get(pk=run.pk)
    assert Event.objects.filter(run=fresh, kind="reasoning").count() == wire_parts("think") == 18
    assert AgentContext.objects.get(run=fresh).source_file.endswith("agents/main/wire.jsonl")
    assert RunFile.objects.filter(run=fresh, path__endswith="wire.jsonl").exists()
    assert fresh.content_hash != run.content_hash and fresh.source_name == run.source_name
    assert set(Assignment.objects.filter(run=fresh).values_list("pk", flat=True)) == assigned
    assert Study.objects.get(pk=study.pk).statistics_version > version  # its figures are no longer current

    again = import_paths(paths=[folder], replace=True).results  # the same files once more: read again, same result
    assert {r.status for r in again} == {"replaced"} and Event.objects.filter(run=run).count() == fresh.n_events


def test_a_replace_whose_files_are_bad_changes_nothing(older):
    folder, run = older
    before = (run.n_events, run.content_hash, list(Event.objects.filter(run=run).values_list("pk", flat=True)))
    wire = next(folder.rglob("parallel/**/wire.jsonl"))
    lines = wire.read_text().splitlines()
    lines[5] = lines[5][:40]  # a line cut in the middle of the file
    wire.write_text("\n".join(lines) + "\n")

    result = next(r for r in import_paths(paths=[folder], replace=True).results if r.status == "failed")

    assert "wire.jsonl:6: not valid JSON" in result.message
    stored = Run.objects.get(pk=run.pk)
    after = (stored.n_events, stored.content_hash, list(Event.objects.filter(run=run).values_list("pk", flat=True)))
    assert after == before


def test_replace_refuses_files_that_now_describe_another_run(tmp_path):
    """The stored run's own files, with a manifest that makes them another task's: not that run, refused."""
    shutil.copytree(CELL, tmp_path / "cell" / "kimi" / "parallel")
    [stored] = import_paths(paths=[tmp_path / "cell"]).results
    run = Run.objects.get(pk=stored.run_id)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("path,task_id\nkimi/parallel,another-task\n")
    [result] = import_paths(paths=[tmp_path / "cell"], replace=True, manifest=manifest).results
    assert result.status == "failed" and f"not stored run #{run.pk}" in result.message
    assert f"run #{run.pk} unchanged" in result.message
    assert Run.objects.get(pk=run.pk).task_id == run.task_id and Event.objects.filter(run=run).count() == run.n_events


def test_the_command_says_what_it_read_again(older, capsys):
    folder, run = older
    with pytest.raises(CommandError):
        call_command("import_trajectories", str(folder))
    call_command("import_trajectories", str(folder), "--replace")
    out = capsys.readouterr().out
    assert f"replaced  run #{run.pk}" in out and "0 imported, 2 read again, 0 already present, 0 failed" in out
