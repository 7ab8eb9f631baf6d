"""Every import is a batch listed on the Import page — a file uploaded there (or through the API) and a folder
imported with `manage.py import_trajectories` alike — with who or what made it, its totals and its report."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from activity.models import ActivityEntry
from tests.factories import FIXTURES, simple_run, write_jsonl
from trajectories import services
from trajectories.models import ImportBatch, Run

pytestmark = pytest.mark.django_db
IMPORTS = reverse("trajectories:import_upload")


def _command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_trajectories", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _detail(batch: ImportBatch) -> str:
    return reverse("trajectories:import_detail", args=[batch.pk])


def test_a_command_import_is_recorded_as_a_batch_with_its_totals_and_report(tmp_path):
    a = write_jsonl(tmp_path / "runs" / "a.jsonl", simple_run("t-a"))
    write_jsonl(tmp_path / "runs" / "b.jsonl", simple_run("t-a", mode="sequential", n_sub=0))
    out, _ = _command(str(tmp_path / "runs"), str(a))
    assert "2 imported, 1 already present, 0 failed" in out  # the command's own output is unchanged
    batch = ImportBatch.objects.get()
    runs = list(Run.objects.order_by("pk"))
    assert (batch.origin, batch.created_by, batch.source_name) == ("command", None, f"{tmp_path / 'runs'} {a}")
    assert (batch.status, batch.total, batch.processed, batch.imported, batch.duplicates, batch.failed) == (
        "done", 3, 3, 2, 1, 0,
    )  # fmt: skip
    assert batch.events == sum(run.n_events for run in runs) and batch.finished_at is not None
    assert [(r["status"], r["run_id"]) for r in batch.report] == [
        ("imported", runs[0].pk), ("imported", runs[1].pk), ("duplicate", runs[0].pk),
    ]  # fmt: skip
    assert {run.batch_id for run in runs} == {batch.pk}
    entry = ActivityEntry.objects.get(action="import.command")
    assert entry.batch_id == batch.pk and "2 imported, 1 already present, 0 failed" in entry.summary


def test_the_command_records_the_user_it_is_given_and_refuses_an_unknown_one(tmp_path, admin_user):
    path = write_jsonl(tmp_path / "r.jsonl", simple_run())
    with pytest.raises(CommandError, match="--user: no user named 'nobody'"):
        _command(str(path), "--user", "nobody")
    assert (ImportBatch.objects.count(), Run.objects.count()) == (0, 0)  # refused before anything is written
    _command(str(path), "--user", admin_user.username)
    batch = ImportBatch.objects.get()
    assert (batch.origin, batch.created_by, batch.status) == ("command", admin_user, "done")
    assert ActivityEntry.objects.get(action="import.command").actor == admin_user


def test_the_batch_page_shows_the_command_with_the_options_that_change_what_is_stored(tmp_path, admin_client_):
    path = write_jsonl(tmp_path / "r.jsonl", simple_run("t-opt"))
    _command(str(path))
    _command(str(path), "--replace", "--format", "parallax", "--quiet-ok")
    first, again = ImportBatch.objects.order_by("pk")
    assert (first.options, again.options) == ("", "--format parallax --replace")
    page = admin_client_.get(_detail(again)).content.decode()
    assert f"<code>import_trajectories {path} --format parallax --replace</code>" in page
    assert f"<code>import_trajectories {path}</code>" in admin_client_.get(_detail(first)).content.decode()
    api = admin_client_.get(f"/api/imports/{again.pk}/").json()
    assert (api["source_name"], api["options"], api["replaced"]) == (str(path), "--format parallax --replace", 1)


def test_a_command_refused_before_importing_leaves_no_batch(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        _command(str(tmp_path / "missing.jsonl"))
    with pytest.raises(CommandError, match="manifest not found"):
        _command(str(write_jsonl(tmp_path / "r.jsonl", simple_run())), "--manifest", str(tmp_path / "m.csv"))
    assert ImportBatch.objects.count() == 0


def test_a_failed_command_import_is_a_failed_batch_naming_the_file_and_line(tmp_path, admin_client_):
    bad = write_jsonl(tmp_path / "bad.jsonl", [simple_run()[0], "{not json"])
    with pytest.raises(CommandError) as raised:
        _command(str(bad))
    assert raised.value.returncode == 2  # the exit code is unchanged
    batch = ImportBatch.objects.get()
    assert (batch.status, batch.imported, batch.failed, Run.objects.count()) == ("failed", 0, 1, 0)
    assert batch.error == "nothing was imported: 1 failed (see below)" and batch.finished_at is not None
    [result] = batch.report
    assert result["status"] == "failed" and result["message"].startswith("bad.jsonl:2: ")
    page = admin_client_.get(_detail(batch)).content.decode()
    assert '<progress class="failed"' in page and "bad.jsonl:2: " in page and "every 1s" not in page
    assert "From: command line" in page and f"import_trajectories {bad}" in page


def test_a_command_import_with_a_bad_file_among_good_ones_is_done_and_lists_the_failure(tmp_path):
    write_jsonl(tmp_path / "good.jsonl", simple_run())
    write_jsonl(tmp_path / "bad.jsonl", ["{not json"])
    with pytest.raises(CommandError):
        _command(str(tmp_path))
    batch = ImportBatch.objects.get()
    assert (batch.status, batch.imported, batch.failed, batch.error) == ("done", 1, 1, "")
    assert sorted((r["source"], r["status"]) for r in batch.report) == [
        ("bad.jsonl", "failed"), ("good.jsonl", "imported")
    ]  # fmt: skip


def test_a_command_stopped_mid_import_is_a_failed_batch_listing_what_was_committed(tmp_path, monkeypatch):
    """Ctrl-C during the second run: the first run, committed, is kept and listed; nothing of the second is
    stored; the batch says failed, and why, instead of running for ever."""
    for task in ("t-1", "t-2", "t-3"):
        write_jsonl(tmp_path / f"{task}.jsonl", simple_run(task))
    monkeypatch.setattr(services, "COMMIT_SECONDS", 0)  # each run committed on its own
    calls = []
    run_import = services.run_import

    def interrupted(**kwargs):
        calls.append(kwargs["source"].name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run_import(**kwargs)

    monkeypatch.setattr(services, "run_import", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _command(str(tmp_path))
    batch = ImportBatch.objects.get()
    [run] = Run.objects.all()
    assert (batch.status, batch.imported, batch.processed, batch.total) == ("failed", 1, 1, 3)
    assert batch.error.startswith("the import stopped after 1 run: KeyboardInterrupt()")
    assert [(r["status"], r["run_id"]) for r in batch.report] == [("imported", run.pk)]
    monkeypatch.undo()
    _command(str(tmp_path))  # importing again stores the rest, once
    assert Run.objects.count() == 3 and ImportBatch.objects.order_by("pk").last().duplicates == 1


def test_an_upload_and_the_command_keep_the_same_books_for_the_same_file(tmp_path, admin_user):
    path = write_jsonl(tmp_path / "r.jsonl", [*simple_run(), "not json"])  # one run, one bad line
    upload = services.import_batch_create(upload=SimpleUploadedFile("r.jsonl", path.read_bytes()), user=admin_user)
    uploaded = services.import_batch_run(batch_id=upload.pk)
    Run.objects.all().delete()
    with pytest.raises(CommandError):
        _command(str(path), "--user", admin_user.username)
    commanded = ImportBatch.objects.get(origin="command")
    fields = ("status", "total", "processed", "imported", "duplicates", "failed", "events", "error")
    assert [getattr(uploaded, f) for f in fields] == [getattr(commanded, f) for f in fields]
    assert [(r["status"], r["message"]) for r in uploaded.report] == [
        (r["status"], r["message"]) for r in commanded.report
    ]
    assert commanded.report[0]["message"].startswith("r.jsonl:") and uploaded.status == "failed"


def test_the_import_page_lists_uploads_and_command_imports_saying_which_is_which(tmp_path, admin_client_, admin_user):
    upload = SimpleUploadedFile("r.jsonl", write_jsonl(tmp_path / "r.jsonl", simple_run("t-up")).read_bytes())
    uploaded = services.import_batch_run(batch_id=services.import_batch_create(upload=upload, user=admin_user).pk)
    _command(str(FIXTURES / "corpus"))
    _command(str(write_jsonl(tmp_path / "mine.jsonl", simple_run("t-mine"))), "--user", admin_user.username)
    page = admin_client_.get(IMPORTS).content.decode()
    assert "No imports yet" not in page
    rows = page.split('<table class="data" id="batches">')[1].split("</table>")[0].split("<tr>")[2:]
    assert len(rows) == 3
    newest, corpus, oldest = rows  # newest first
    assert "command line as boss" in newest and "mine.jsonl" in newest
    assert "command line" in corpus and " as " not in corpus and str(FIXTURES / "corpus") in corpus
    assert ">done<" in corpus and ">2<" in corpus  # the fixture corpus: 2 runs imported
    assert "uploaded by boss" in oldest and f'href="{_detail(uploaded)}"' in oldest
    detail = admin_client_.get(_detail(ImportBatch.objects.get(source_name=str(FIXTURES / "corpus")))).content
    assert detail.decode().count("imported (run #") == 2


def test_the_import_page_pages_through_every_batch(admin_client_, settings):
    from trajectories import views

    batches = [ImportBatch.objects.create(origin="command", source_name=f"folder-{i}") for i in range(25)]
    first = admin_client_.get(IMPORTS).content.decode()
    assert first.count('<td class="source">') == views.BATCHES_PER_PAGE and "folder-24" in first
    assert "folder-4<" not in first and 'rel="next"' in first
    second = admin_client_.get(IMPORTS, {"after": batches[5].pk}).content.decode()
    assert second.count('<td class="source">') == 5 and "folder-4<" in second and "folder-0<" in second


@pytest.mark.parametrize(
    "cursor,message",
    [
        ("abc", "&#x27;after&#x27; must be the number of a row in this list, got &#x27;abc&#x27;"),
        ("-1", "&#x27;after&#x27; must be the number of a row in this list, got &#x27;-1&#x27;"),
        ("99999999", "row 99999999 no longer exists: start again from the first page"),
    ],
)
def test_a_bad_page_cursor_is_a_400_naming_it(admin_client_, cursor, message):
    ImportBatch.objects.create(origin="command", source_name="x")
    response = admin_client_.get(IMPORTS, {"after": cursor})
    assert response.status_code == 400 and message in response.content.decode()


@pytest.mark.parametrize("who", ["annotator", "adjudicator", "outsider"])
def test_only_admins_see_imports_of_either_kind(request, who, tmp_path):
    from tests.factories import client_for

    _command(str(write_jsonl(tmp_path / "r.jsonl", simple_run())))
    batch = ImportBatch.objects.get()
    client = client_for(request.getfixturevalue(who))
    assert client.get(IMPORTS).status_code == 403
    assert client.get(_detail(batch)).status_code == 403
    assert client.get(f"/api/imports/{batch.pk}/").status_code == 403


def test_the_api_says_where_a_batch_came_from_and_counts_runs_read_again(tmp_path, admin_client_):
    path = write_jsonl(tmp_path / "r.jsonl", simple_run())
    _command(str(path))
    _command(str(path), "--replace")
    first, again = ImportBatch.objects.order_by("pk")
    data = admin_client_.get(f"/api/imports/{first.pk}/").json()
    assert (data["origin"], data["status"], data["imported"], data["replaced"]) == ("command", "done", 1, 0)
    data = admin_client_.get(f"/api/imports/{again.pk}/").json()
    assert (data["status"], data["imported"], data["replaced"], data["failed"]) == ("done", 0, 1, 0)
    assert "0 imported · 1 read again" in admin_client_.get(_detail(again)).content.decode()


def test_a_command_import_left_running_by_a_dead_process_says_so_on_the_list_and_its_page(admin_client_, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.PARALLAX_IMPORT_STALL_SECONDS = 600
    batch = ImportBatch.objects.create(origin="command", source_name="corpus/", status="running", total=4,
                                       processed=1, progressed_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    fresh = ImportBatch.objects.create(origin="command", source_name="other/", status="running", total=4,
                                       processed=1, progressed_at=timezone.now())  # fmt: skip
    listed = admin_client_.get(IMPORTS).content.decode()
    assert '<strong class="status failed">failed</strong>' in listed  # the list says so too
    assert '<strong class="status running">running</strong>' in listed  # the one still making progress
    page = admin_client_.get(_detail(batch)).content.decode()
    assert "its command was stopped or crashed" in page and "run the command again" in page
    assert ImportBatch.objects.get(pk=batch.pk).status == "failed"
    assert ImportBatch.objects.get(pk=fresh.pk).status == "running"


def test_the_import_page_reads_the_same_queries_for_two_batches_and_a_full_page(admin_client_, admin_user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import new_user

    def queries() -> int:
        admin_client_.get(IMPORTS)  # warm: session, caches
        with CaptureQueriesContext(connection) as captured:
            assert admin_client_.get(IMPORTS).status_code == 200
        return len(captured)

    ImportBatch.objects.create(origin="upload", created_by=admin_user, source_name="a.zip", status="done")
    ImportBatch.objects.create(origin="command", source_name="corpus/", status="failed")
    few = queries()
    for i in range(30):  # each uploaded by another person
        ImportBatch.objects.create(origin="upload", created_by=new_user(f"uploader{i}"), source_name=f"{i}.zip")
    assert queries() == few <= 10
