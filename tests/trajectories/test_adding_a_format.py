"""A format is one module that exports FORMAT, and a line in the registry: nothing else changes. A toy
format registered here is found, grouped, imported, offered as `--format`, and named in the messages
that list the formats."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.factories import simple_run, write_jsonl
from trajectories.formats import registry
from trajectories.formats.common import iter_json_lines
from trajectories.formats.records import (
    MAIN,
    SEQUENTIAL,
    ContextRecord,
    EventRecord,
    Format,
    Parser,
    Record,
    RunHeader,
    RunSource,
    display_name,
)
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


class ToyParser(Parser):
    """A toy log: `{"toy": 1, "task": …, "said": …}` lines; one event per line of every file of the run."""

    def parse(self, source: RunSource) -> Iterator[Record]:
        lines = [obj for path in source.files for _, obj in iter_json_lines(path)]
        yield RunHeader(benchmark="toybench", task_id=lines[0]["task"], agent="Toy", mode=SEQUENTIAL)
        yield ContextRecord(id="main", role=MAIN, label="the toy")
        for seq, line in enumerate(lines):
            yield EventRecord(context="main", seq=seq, kind="message", text=line["said"])


def toy_line(first):
    return isinstance(first, dict) and first.get("toy") == 1


TOY = Format(name="toy", description="a toy log", parser=ToyParser, looks_like=toy_line)


def by_folder(files: list[Path], root: Path | None):
    """A toy session is a folder: its files are one run."""
    folders: dict[Path, list[Path]] = {}
    for file in files:
        folders.setdefault(file.parent, []).append(file)
    runs = [RunSource(name=display_name(folder, root), format="toy", files=group, root=root)
            for folder, group in folders.items()]  # fmt: skip
    return runs, []


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(registry, "FORMATS", [*registry.FORMATS, TOY])


def test_a_registered_format_is_recognised_and_imported(toy, tmp_path):
    write_jsonl(tmp_path / "bundle" / "play.jsonl", [{"toy": 1, "task": "t-7", "said": "hello"}])
    report = import_paths(paths=[tmp_path / "bundle"])
    assert report.count("imported") == 1, report.results
    run = Run.objects.get()
    assert (run.source_format, run.task.external_id, run.agent.name) == ("toy", "t-7", "Toy")
    assert [(e.kind, e.text) for e in run.events.all()] == [("message", "hello")]


def test_a_registered_format_groups_its_own_files_into_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "FORMATS", [*registry.FORMATS, replace(TOY, group=by_folder)])
    for session, said in (("s1", ["a", "b"]), ("s2", ["c"])):
        for n, text in enumerate(said):
            write_jsonl(tmp_path / "bundle" / session / f"{n}.jsonl", [{"toy": 1, "task": session, "said": text}])
    assert import_paths(paths=[tmp_path / "bundle"]).count("imported") == 2
    texts = {run.task.external_id: sorted(e.text for e in run.events.all()) for run in Run.objects.all()}
    assert texts == {"s1": ["a", "b"], "s2": ["c"]}


def test_a_registered_format_is_a_format_choice(toy, tmp_path):
    path = write_jsonl(tmp_path / "play.jsonl", [{"toy": 1, "task": "t-7", "said": "hello"}])
    call_command("import_trajectories", str(path), "--format", "toy", stdout=io.StringIO())
    assert Run.objects.get().source_format == "toy"


def test_the_messages_that_list_the_formats_name_a_registered_one(toy, tmp_path):
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"hello": "world"}])
    (tmp_path / "notes.txt").write_text("x")
    parallax = write_jsonl(tmp_path / "run.jsonl", simple_run())
    messages = [r.message for r in import_paths(paths=[odd, tmp_path / "notes.txt"]).results]
    messages += [r.message for r in import_paths(paths=[parallax], fmt="toy").results]
    assert len(messages) == 3 and all("a toy log" in message for message in messages), messages
    assert Run.objects.count() == 0
