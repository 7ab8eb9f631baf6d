"""Every input ends as imported, already present, or failed with file, line and field: an import
never says "0 imported, 0 failed" for a non-empty input, a forced format that does not fit names the
one the file looks like, and older and newer variants of the native formats are recognised."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.factories import REAL, simple_run, write_jsonl
from trajectories import services
from trajectories.forms import UploadForm
from trajectories.models import AgentContext, ImportBatch, Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db

CLAUDE = REAL / "claude-code-inline" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
SWE = REAL / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj"


def _failed(report) -> str:
    assert [r.status for r in report.results] == ["failed"], report.results
    return report.results[0].message


@pytest.mark.parametrize(
    ("forced", "named"),
    [("codex", "looks like Parallax JSONL, not a Codex rollout"), ("swe_agent", "not a SWE-agent trajectory")],
)
def test_a_forced_format_that_does_not_fit_names_the_one_it_looks_like(tmp_path, forced, named):
    path = write_jsonl(tmp_path / "run.jsonl", simple_run())
    message = _failed(import_paths(paths=[path], fmt=forced))
    assert named in message and "run.jsonl" in message and "'parallax' or 'auto'" in message
    assert Run.objects.count() == 0


def test_a_forced_format_that_fits_imports(tmp_path):
    path = write_jsonl(tmp_path / "run.jsonl", simple_run())
    assert import_paths(paths=[path], fmt="parallax").count("imported") == 1


@pytest.mark.parametrize("name", ["notes.txt", "table.csv"])
def test_a_file_that_is_no_trajectory_is_a_failure(tmp_path, name):
    path = tmp_path / name
    path.write_text("a,b\n1,2\n")
    message = _failed(import_paths(paths=[path]))
    assert f"{name}: not a trajectory" in message


def test_a_folder_without_trajectories_is_a_failure(tmp_path):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "readme.md").write_text("nothing here")
    assert "bundle: no trajectories found" in _failed(import_paths(paths=[tmp_path / "bundle"]))


def test_an_empty_zip_is_a_failure(tmp_path):
    with zipfile.ZipFile(tmp_path / "empty.zip", "w"):
        pass
    assert "empty.zip: no trajectories found" in _failed(import_paths(paths=[tmp_path / "empty.zip"]))


def test_an_unrecognised_jsonl_says_what_it_is_not_without_command_line_advice(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"hello": "world"}])
    message = _failed(import_paths(paths=[path]))
    assert "odd.jsonl:1: format not recognised" in message and "--format" not in message


def test_a_batch_where_nothing_imported_is_failed_not_done(tmp_path, admin_user):
    upload = SimpleUploadedFile("odd.jsonl", b'{"hello": "world"}\n')
    batch = services.import_batch_create(upload=upload, user=admin_user)
    batch = services.import_batch_run(batch_id=batch.pk)
    assert batch.status == ImportBatch.Status.FAILED and batch.progress_percent == 100
    assert "nothing was imported" in batch.error and batch.failed == 1


def test_a_batch_with_one_good_run_is_done(tmp_path, admin_user):
    data = write_jsonl(tmp_path / "r.jsonl", simple_run()).read_bytes()
    batch = services.import_batch_create(upload=SimpleUploadedFile("r.jsonl", data), user=admin_user)
    assert services.import_batch_run(batch_id=batch.pk).status == ImportBatch.Status.DONE


@pytest.mark.parametrize("name", ["run.traj", "run.traj.gz", "run.json.gz", "bundle.tgz"])
def test_the_upload_page_accepts_every_documented_suffix(name):
    form = UploadForm(data={"format": "auto"}, files={"file": SimpleUploadedFile(name, b"{}")})
    assert form.is_valid(), form.errors


def test_the_upload_service_refuses_other_suffixes(admin_user):
    from trajectories.formats.records import FormatError

    with pytest.raises(FormatError, match="notes.txt: expected one of"):
        services.import_batch_create(upload=SimpleUploadedFile("notes.txt", b"x"), user=admin_user)
    assert ImportBatch.objects.count() == 0


@pytest.mark.parametrize(
    "leading",
    [
        [{"type": "summary", "summary": "Resumed session", "leafUuid": "f0c1"}],
        [
            {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-08-07T08:48:43.189Z",
             "sessionId": "5c0375b4-57a5-4f26-b12d-d022ee4e51b7", "content": "the task"},
            {"type": "queue-operation", "operation": "dequeue", "timestamp": "2026-08-07T08:48:43.190Z",
             "sessionId": "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"},
        ],
    ],
    ids=["summary first (older versions, resumed sessions)", "queue-operation first (2.x)"],
)  # fmt: skip
def test_claude_code_sessions_with_leading_metadata_lines_are_recognised(tmp_path, leading):
    path = tmp_path / CLAUDE.name
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in leading) + CLAUDE.read_bytes())
    report = import_paths(paths=[path])
    assert report.count("imported") == 1, report.results
    run = Run.objects.get()
    assert run.source_format == "claude_code" and run.subagents_created == 2


def test_a_swe_agent_trajectory_with_only_its_history_imports_its_messages(tmp_path):
    data = json.loads(SWE.read_text())
    del data["trajectory"]
    (tmp_path / "history.traj").write_text(json.dumps(data))
    report = import_paths(paths=[tmp_path / "history.traj"])
    assert report.count("imported") == 1, report.results
    run = Run.objects.get()
    actions = [a for a in (m.get("action") for m in data["history"] if m["role"] == "assistant") if a]
    assert run.events.filter(kind__in=("tool_call", "file_write")).count() == len(actions) > 0
    assert run.events.filter(kind="tool_result").count() == sum(m["role"] == "tool" for m in data["history"])
    assert any("read from history[]" in w for w in run.warnings)


def test_a_swe_agent_trajectory_with_neither_steps_nor_history_is_a_failure(tmp_path):
    (tmp_path / "empty.traj").write_text(json.dumps({"trajectory": [], "history": [], "info": {}}))
    assert "nothing to import" in _failed(import_paths(paths=[tmp_path / "empty.traj"]))


def test_a_kimi_session_with_only_its_state_says_what_is_missing(tmp_path):
    state = next((REAL / "kimi").rglob("state.json"))
    shutil.copy(state, tmp_path / "state.json")
    session = json.loads(state.read_text())["id"]
    message = _failed(import_paths(paths=[tmp_path]))
    assert f"Kimi Code session {session}" in message and f"server/events/{session}.jsonl" in message
    assert AgentContext.objects.count() == 0


def _gzip_of(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)  # a fixed header: every test worker collects the same test id


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("nul.jsonl", b'{"type": "run_header", "x": "a\x00b"}\n', "nul.jsonl:1: line 1 holds a NUL byte"),
        ("surrogate.jsonl", b'\n{"a": "\xed\xa0\x80"}\n', "surrogate.jsonl:2: line 2 is not UTF-8 text"),
        ("escaped.jsonl", b'{"a": "\\ud800"}\n', "escaped.jsonl:1: line 1 holds a lone surrogate"),
        ("garbage.jsonl", b"{not json\n", "garbage.jsonl:1: line 1 is not JSON"),
        ("plain.jsonl.gz", b'{"type": "run_header"}\n', "plain.jsonl.gz: named .gz but not a gzip file"),
        ("cut.jsonl.gz", _gzip_of(b'{"type": "run_header"}\n' * 50)[:-12], "cut.jsonl.gz: the .gz file is cut short"),
    ],
)
def test_a_log_that_is_not_json_says_why(tmp_path, name, content, says):
    """A NUL byte, text that is not UTF-8, an escaped lone surrogate, a broken line, a .gz that is not gzip or is
    cut short: each is named for what it is, with its line where there is one, and nothing is stored."""
    path = tmp_path / name
    path.write_bytes(content)
    message = _failed(import_paths(paths=[path]))
    assert says in message, message
    assert Run.objects.count() == 0
