"""The study's published records of one complete task folder of its artifact, loaded into a study of the
six runs imported from the same folder and written back: byte for byte, all or nothing. Run on SQLite and
on PostgreSQL (DATABASE_URL=postgres://…): the stored data must keep the files' key order there too."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from activity.models import ActivityEntry
from annotation.models import Annotation, Assignment, AuditEntry, Discussion, FinalCoding, PublishedRecord
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import LabelInput, annotation_save, annotation_submit
from annotation.services.studies import study_create
from tests.factories import ARTIFACT_AGENTS as AGENTS
from tests.factories import ARTIFACT_TASK as TASK
from tests.factories import artifact_run_of as run_of

pytestmark = pytest.mark.django_db

RECORD_FILES = ("annotation.md", "review.json", "advantage-review.json")


def published_files(root) -> dict[str, bytes]:
    """The study's record files under `root`, by path: what the artifact publishes beside the cells."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.name in RECORD_FILES and path.parent.parent.name == "django__django-10999"
    }


def counts() -> dict[str, int]:
    models = (PublishedRecord, Annotation, Assignment, FinalCoding, AuditEntry, ActivityEntry)
    return {model.__name__: model.objects.count() for model in models}


def test_the_three_pairs_round_trip_byte_for_byte(artifact_study, artifact_root, tmp_path):
    originals = published_files(artifact_root)
    assert sorted(originals) == sorted(f"{TASK}/{agent}/{name}" for agent in AGENTS for name in RECORD_FILES[:2])
    out = io.StringIO()
    call_command("import_published", str(artifact_study.pk), str(artifact_root), "--as-gold", stdout=out)
    stored = {record.path: record for record in PublishedRecord.objects.all()}
    assert sorted(stored) == sorted(originals)  # each file under the path the artifact names it by
    for path, record in stored.items():
        assert record.kind == ("annotation" if path.endswith(".md") else "review")
        assert record.text.encode("utf-8") == originals[path]  # the text as published
        if record.kind == "review":
            assert record.data == json.loads(originals[path])  # the whole document as data
            assert list(record.data) == list(json.loads(originals[path]))  # in its order (PostgreSQL: `json`)
        else:
            header = originals[path].decode().split("\n\n")[0].splitlines()
            assert list(record.data["header"].items()) == [tuple(line.split(": ", 1)) for line in header]

    exported = tmp_path / "out"
    said = io.StringIO()
    call_command("export_published", str(artifact_study.pk), "--out", str(exported), stdout=said)
    written = published_files(exported)
    assert sorted(written) == sorted(originals)
    for path, raw in originals.items():
        assert written[path] == raw, path
    assert "differ" not in said.getvalue() and "wrote 3 record(s)" in said.getvalue()


def test_an_adjudicated_change_is_exported_and_the_review_mismatch_reported(
    artifact_study, artifact_root, codebook, adjudicator, tmp_path
):
    """Claude's record is one coder's coding; the other codes Artifact Leakage only; the adjudicator rules
    Artifact Leakage and Missing Verifier Return. The export carries the ruling, keeps the published header,
    prose and review, and says where the final labels and review.json part."""
    run = run_of(artifact_study, "claude")
    first, second = Assignment.objects.filter(study=artifact_study, run=run).order_by("slot")
    folder = artifact_root / TASK / "claude"
    call_command(
        "import_published",
        str(artifact_study.pk),
        str(folder),
        "--as-annotator",
        first.annotator.username,
        stdout=io.StringIO(),
    )
    leakage, verifier = codebook.codes.get(name="Artifact Leakage"), codebook.codes.get(name="Missing Verifier Return")
    annotation = annotation_for(assignment=second)
    annotation_save(
        annotation=annotation,
        actor=second.annotator,
        version=annotation.version,
        no_failure=False,
        notes="",
        labels=[LabelInput(code_id=leakage.pk, rationale="probe scripts in the patch")],
    )
    annotation_submit(annotation=annotation, actor=second.annotator, version=annotation.version)
    discussion = Discussion.objects.get(study=artifact_study, run=run)
    flow.discussion_escalate(discussion=discussion, actor=second.annotator)
    rulings = [
        flow.Ruling(leakage.pk, "Scratch files reached the patch."),
        flow.Ruling(verifier.pk, "The verifier's verdict never came back."),
    ]
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=rulings)

    said = io.StringIO()
    call_command("export_published", str(artifact_study.pk), "--out", str(tmp_path), stdout=said)
    original = (folder / "annotation.md").read_bytes()
    exported = (tmp_path / TASK / "claude" / "annotation.md").read_bytes()
    head = original.split(b"\n## Failure 1\n")[0]
    assert exported.startswith(head + b"\n## Failure 1\n")  # the published header and prose, as published
    blocks = [block.splitlines() for block in exported.decode().split("\n## Failure ")[1:]]
    assert [line for block in blocks for line in block if line.startswith("third_label:")] == [
        "third_label: Artifact Leakage",
        "third_label: Missing Verifier Return",
    ]
    assert "reasoning: The verifier's verdict never came back." in exported.decode()
    assert (tmp_path / TASK / "claude" / "review.json").read_bytes() == (folder / "review.json").read_bytes()
    assert sorted(p.name for p in (tmp_path / TASK).iterdir()) == ["claude"]  # the one run with final labels
    report = said.getvalue()
    assert f"the final labels differ from {TASK}/claude/review.json" in report
    assert "in the final labels only: Missing Verifier Return" in report
    assert "retained by review.json only: Fan-out Budget Exhaustion" in report


def test_as_annotator_loads_all_or_nothing_in_a_two_of_three_study(artifact_study, artifact_root):
    """Each coder codes two of the three runs; the third record is refused by name, and nothing is stored."""
    coder = artifact_study.annotators.order_by("username").first()
    mine = set(Assignment.objects.filter(study=artifact_study, annotator=coder).values_list("run_id", flat=True))
    [other] = [agent for agent in AGENTS if run_of(artifact_study, agent).pk not in mine]
    before = counts()
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 of 3 record"):
        call_command(
            "import_published",
            str(artifact_study.pk),
            str(artifact_root),
            "--as-annotator",
            coder.username,
            stdout=io.StringIO(),
            stderr=err,
        )
    assert counts() == before  # no record, no coding, no assignment, no audit or activity entry
    coders = sorted(
        Assignment.objects.filter(study=artifact_study, run=run_of(artifact_study, other)).values_list(
            "annotator__username", flat=True
        )
    )
    assert err.getvalue().strip() == (
        f"FAILED {TASK}/{other}/annotation.md: run #{run_of(artifact_study, other).pk} (django__django-10999 by "
        f"{run_of(artifact_study, other).agent.name}) already has its 2 coders in Artifact ({', '.join(coders)}); "
        f"{coder.username} is not one of them"
    )
    # the two runs the coder does code load, once the third is left out
    for agent in AGENTS:
        if agent != other:
            call_command(
                "import_published",
                str(artifact_study.pk),
                str(artifact_root / TASK / agent),
                "--as-annotator",
                coder.username,
                stdout=io.StringIO(),
            )
    assert Annotation.objects.filter(status="submitted", assignment__annotator=coder).count() == 2
    assert PublishedRecord.objects.count() == 4


def test_as_annotator_takes_the_free_places_of_an_unassigned_study(artifact_runs, codebook, trio, adjudicator):
    study = study_create(name="Open", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    out = io.StringIO()
    call_command("import_published", str(study.pk), str(artifact_runs), "--as-annotator", trio[1].username, stdout=out)
    assert Assignment.objects.filter(study=study, annotator=trio[1]).count() == 3
    annotations = Annotation.objects.filter(assignment__study=study)
    assert sorted(a.status for a in annotations) == ["submitted"] * 3
    assert sorted(a.no_failure for a in annotations) == [False, True, True]  # codex and kimi: no failure mode
    assert "no failure mode" in out.getvalue() and "Fan-out Budget Exhaustion, Artifact Leakage" in out.getvalue()
    # a second coder loading the same records: their codings, the same six files (not stored twice)
    call_command(
        "import_published", str(study.pk), str(artifact_runs), "--as-annotator", trio[2].username, stdout=io.StringIO()
    )
    assert PublishedRecord.objects.filter(study=study).count() == 6
    assert Annotation.objects.filter(assignment__study=study, status="submitted").count() == 6


def test_as_gold_loads_all_or_nothing(artifact_study, artifact_root, tmp_path):
    kimi = artifact_root / TASK / "kimi"
    call_command("import_published", str(artifact_study.pk), str(kimi), "--as-gold", stdout=io.StringIO())
    before = counts()
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command(
            "import_published",
            str(artifact_study.pk),
            str(artifact_root),
            "--as-gold",
            stdout=io.StringIO(),
            stderr=err,
        )
    assert counts() == before
    assert f"{TASK}/kimi/annotation.md: run #{run_of(artifact_study, 'kimi').pk}" in err.getvalue()
    assert "already has final labels in Artifact" in err.getvalue()
    # A broken review.json beside one of the records: refused by file and JSON field before anything is stored
    # (the record files only, copied out of the artifact's folder; the runs are the imported ones).
    records = tmp_path / "records"
    for agent in AGENTS:
        for name in RECORD_FILES[:2]:
            target = records / TASK / agent / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(artifact_root / TASK / agent / name, target)
    review = json.loads((records / TASK / "codex" / "review.json").read_bytes())
    review["taxonomy_decisions"][3]["candidates"][0]["serial_contrast"] = [{"path": "serial/cell/model.patch"}]
    (records / TASK / "codex" / "review.json").write_text(json.dumps(review, indent=2))
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 of 3 record"):
        call_command(
            "import_published", str(artifact_study.pk), str(records), "--as-gold", stdout=io.StringIO(), stderr=err
        )
    # every problem at once: the file that does not parse, and the run of a record that does which has final labels
    assert err.getvalue().strip().splitlines() == [
        f"FAILED {TASK}/codex/review.json: field 'taxonomy_decisions[3].candidates[0].serial_contrast[0].line': "
        "expected a line number (1 or more), got null",
        f"FAILED {TASK}/kimi/annotation.md: run #{run_of(artifact_study, 'kimi').pk} (django__django-10999 by "
        "Kimi Code) already has final labels in Artifact",
    ]
    assert counts() == before


def test_the_stored_data_keeps_its_key_order(artifact_study):
    """PostgreSQL's jsonb would sort these keys (shortest first); the record's data keeps them as written."""
    document = {"zeta_last_in_sorted_order": 1, "alpha": {"yy": 2, "b": 3}, "m": [{"z": 1, "a": 2}]}
    record = PublishedRecord.objects.create(
        study=artifact_study, run=run_of(artifact_study, "codex"), kind="review", name="r.json", text="", data=document
    )
    again = PublishedRecord.objects.get(pk=record.pk).data
    assert json.dumps(again) == json.dumps(document)
    assert list(PublishedRecord.objects.filter(pk=record.pk).values_list("data__alpha__yy", flat=True)) == [2]


def test_a_nearest_rejected_label_outside_the_codebook_is_reported_and_written_back(
    artifact_study, artifact_root, tmp_path
):
    """The codebook has no code of that name: the label keeps no code, the import says so, and the export
    writes the record's own text back — the file still round-trips."""
    pair = tmp_path / "in" / TASK / "claude"
    shutil.copytree(artifact_root / TASK / "claude", pair, ignore=shutil.ignore_patterns("parallel", "serial"))
    original = (pair / "annotation.md").read_text(encoding="utf-8")
    changed = original.replace("nearest_rejected_label: Missing Verifier Return\n",
                               "nearest_rejected_label: Missing Verifier Returns\n")  # fmt: skip
    assert changed != original
    (pair / "annotation.md").write_text(changed, encoding="utf-8")
    out = io.StringIO()
    call_command("import_published", str(artifact_study.pk), str(pair), "--as-gold", stdout=out)
    assert "nearest rejected label 'Missing Verifier Returns' is not in the codebook" in out.getvalue()
    call_command("export_published", str(artifact_study.pk), "--out", str(tmp_path / "out"), stdout=io.StringIO())
    assert (tmp_path / "out" / TASK / "claude" / "annotation.md").read_text(encoding="utf-8") == changed


def test_as_annotator_refuses_a_record_with_nothing_to_submit_and_stores_nothing(
    artifact_runs, codebook, trio, adjudicator, tmp_path
):
    study = study_create(name="Open", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    records = tmp_path / "in" / TASK
    for agent in AGENTS:
        shutil.copytree(
            artifact_runs / TASK / agent, records / agent, ignore=shutil.ignore_patterns("parallel", "serial")
        )
    claude = records / "claude" / "annotation.md"
    text = claude.read_text(encoding="utf-8")
    text = text.replace("third_label: Fan-out Budget Exhaustion", "third_label: Fan-out Overload")
    claude.write_text(text.replace("third_label: Artifact Leakage", "third_label: Artifact Spill"), encoding="utf-8")
    before = counts()
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 of 3 record"):
        call_command("import_published", str(study.pk), str(records), "--as-annotator", trio[0].username,
                     stdout=io.StringIO(), stderr=err)  # fmt: skip
    assert "none of its labels (Fan-out Overload, Artifact Spill) is in the codebook" in err.getvalue()
    assert counts() == before
