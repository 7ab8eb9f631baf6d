"""A study moves to a new frozen codebook version with a key map: renames and merges carry the
labels over, a split reopens the codings (and the final coding) that used it, the move is recorded,
and κ is reported per codebook version."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest

from activity.models import ActivityEntry
from annotation.analysis import compute
from annotation.analysis.inputs import independent_codings, read_inputs
from annotation.analysis.store import analysis_refresh
from annotation.errors import AnnotationError
from annotation.models import Annotation, Assignment, AuditEntry, FinalCoding, Label, StudyCodebookMove
from annotation.selectors.queue import next_assignment
from annotation.services.codebook_move import study_move_codebook
from taxonomy.models import FrozenCodebookError
from taxonomy.services import code_rename, code_split, codebook_freeze, codebook_new_version, codes_merge
from tests.factories import client_for, code_keys

pytestmark = pytest.mark.django_db

KEY_MAP = {
    "lossy-handoff": "lost-handoff",  # rename
    "no-assembly-owner": "no-delivery-owner",  # merge …
    "no-pipeline-owner": "no-delivery-owner",  # … of two
    "same-file-collision": ["same-file-overwrite", "same-file-conflict"],  # split
}


@pytest.fixture
def v2(codebook, admin_user):
    draft = codebook_new_version(codebook=codebook, user=admin_user, change_log="for the move")
    code_rename(code=draft.codes.get(key="lossy-handoff"), name="Lost Handoff", key="lost-handoff")
    codes_merge(
        codebook=draft, keys=["no-assembly-owner", "no-pipeline-owner"], into="no-delivery-owner", name="No Delivery"
    )
    code_split(
        code=draft.codes.get(key="same-file-collision"),
        parts=[("same-file-overwrite", "Same-File Overwrite"), ("same-file-conflict", "Same-File Conflict")],
    )
    return codebook_freeze(codebook=draft)


def pair(study, run):
    return list(Assignment.objects.filter(study=study, run=run).order_by("slot").select_related("annotator", "run"))


@pytest.fixture
def coded(study, codebook):
    runs = list(study.runs.order_by("pk"))
    r1, r2, r3, r4 = (pair(study, run) for run in runs[:4])
    code_keys(r1[0], ["lossy-handoff"]), code_keys(r1[1], ["lossy-handoff"])  # agreed: a final
    (
        code_keys(r2[0], ["no-assembly-owner", "no-pipeline-owner"]),
        code_keys(r2[1], ["same-file-collision"]),
    )  # a discussion
    code_keys(r3[0], ["same-file-collision"]), code_keys(r3[1], ["same-file-collision"])  # agreed on a code that splits
    code_keys(r4[0], ["lossy-handoff"], submit=False)  # a draft
    return r1, r2, r3, r4


def keys_of(annotation):
    return [(label.code.key, label.instance) for label in annotation.labels.select_related("code")]


def test_move_carries_renames_and_merges_and_reopens_splits(study, codebook, v2, coded, adjudicator):
    r1, r2, r3, r4 = coded
    assert FinalCoding.objects.filter(study=study).count() == 2
    move = study_move_codebook(study=study, codebook=v2, key_map=KEY_MAP, actor=adjudicator, note="v2")
    study.refresh_from_db()
    assert study.codebook_id == v2.pk
    assert (move.from_codebook_id, move.to_codebook_id, move.actor_id) == (codebook.pk, v2.pk, adjudicator.pk)
    assert move.key_map["lossy-handoff"] == ["lost-handoff"] and len(move.key_map["same-file-collision"]) == 2
    assert (move.mapped_labels, move.reopened) == (5, 3)  # runs 1 (2), 2 (the merge: 2), 4 (1); 2 + 3 reopened
    assert ActivityEntry.objects.filter(action="study.codebook_move", study_id=study.pk).exists()
    # Every label of the study now points at the new version's codes.
    assert not Label.objects.filter(annotation__assignment__study=study).exclude(code__codebook=v2).exists()

    one = [Annotation.objects.get(assignment=a) for a in r1]
    assert [keys_of(a) for a in one] == [[("lost-handoff", 1)]] * 2 and all(a.is_submitted for a in one)
    assert [a.codebook_id for a in one] == [codebook.pk] * 2  # coded against v1
    final = FinalCoding.objects.get(study=study, run=r1[0].run)
    assert [lb.code.key for lb in final.labels.select_related("code")] == ["lost-handoff"]
    assert final.labels.get().code.codebook_id == v2.pk

    merged = Annotation.objects.get(assignment=r2[0])
    assert keys_of(merged) == [("no-delivery-owner", 1), ("no-delivery-owner", 2)] and merged.is_submitted
    split = Annotation.objects.get(assignment=r2[1])
    assert split.status == "draft" and keys_of(split) == []
    assert "same-file-collision" in split.recode_reason and "split into same-file-overwrite, same-file-conflict" in (
        split.recode_reason
    )
    assert "because same-file-collision" in split.recode_reason  # the rationale is not lost
    entry = AuditEntry.objects.filter(annotation=split, action="codebook-move").get()
    assert entry.before["labels"][0]["code"] == "same-file-collision" and entry.after["labels"] == []

    # The final coding of run 3 used the split code: removed; both codings are back in the queues.
    assert not FinalCoding.objects.filter(study=study, run=r3[0].run).exists()
    for assignment in r3:
        assert Annotation.objects.get(assignment=assignment).status == "draft"
    assert next_assignment(user=r3[0].annotator, study=study) is not None
    draft = Annotation.objects.get(assignment=r4[0])
    assert keys_of(draft) == [("lost-handoff", 1)] and draft.status == "draft" and draft.recode_reason == ""


def test_recoding_after_a_split_and_kappa_per_version(study, codebook, v2, coded, adjudicator, tmp_path):
    r1, r2, r3, r4 = coded
    study_move_codebook(study=study, codebook=v2, key_map=KEY_MAP, actor=adjudicator)
    for assignment in r3:
        again = code_keys(assignment, ["same-file-overwrite"])
        assert (again.codebook_id, again.recode_reason) == (v2.pk, "")
    assert FinalCoding.objects.get(study=study, run=r3[0].run).labels.get().code.key == "same-file-overwrite"

    rows = compute.kappa_by_version(read_inputs(study, parts=("versions",)), resamples=0)
    assert [(r["version"], r["current"], r["codings"], r["runs_compared"]) for r in rows] == [
        (1, False, 6, 3),
        (2, True, 2, 1),
    ]
    # The headline (current version) reads the codings against v2 only: their keys are v2's.
    taxonomy, codings, _ = independent_codings(study=study)
    assert {c.codes for c in codings} == {frozenset({"same-file-overwrite"})}
    stored = analysis_refresh(study_id=study.pk)
    assert [r["version"] for r in stored.payload["by_version"]] == [1, 2]

    client = client_for(adjudicator)
    body = client.get(f"/annotate/studies/{study.pk}/").content.decode()
    assert "κ per codebook version" in body and 'v2 <span class="small muted">(current)' in body
    response = client.get(f"/annotate/studies/{study.pk}/export/kappa-by-version.csv")
    exported = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["version"], r["codings"], r["current"]) for r in exported] == [("1", "6", "False"), ("2", "2", "True")]
    # The reproducibility bundle's codings are the current version's (their keys resolve).
    from django.core.management import call_command

    out = tmp_path / "bundle.zip"
    call_command("export_study", str(study.pk), "--out", str(out), stdout=io.StringIO())
    with zipfile.ZipFile(out) as bundle:
        codes = {r["mode"] for r in csv.DictReader(io.StringIO(bundle.read("independent_codings.csv").decode()))}
    assert codes == {"same-file-overwrite"}


def _unchanged(study, codebook):
    study.refresh_from_db()
    assert study.codebook_id == codebook.pk and not StudyCodebookMove.objects.exists()
    assert not Label.objects.filter(annotation__assignment__study=study).exclude(code__codebook=codebook).exists()
    assert not AuditEntry.objects.filter(action="codebook-move").exists()


@pytest.mark.parametrize(
    "key_map,needles",
    [
        ({**KEY_MAP, "ghost": "lost-handoff"}, ["'ghost' is not a failure mode of"]),
        ({**KEY_MAP, "lossy-handoff": "nope"}, ["'lossy-handoff' maps to 'nope', not a failure mode of"]),
        ({**KEY_MAP, "lossy-handoff": []}, ["'lossy-handoff' maps to nothing"]),
        (
            {k: v for k, v in KEY_MAP.items() if k != "lossy-handoff"},
            ["'lossy-handoff' is used by 4 label(s) of this study and is neither mapped nor a failure mode"],
        ),
        ({}, ["'lossy-handoff' is used", "'no-assembly-owner' is used", "'same-file-collision' is used"]),
    ],
)
def test_a_bad_key_map_names_the_key_and_writes_nothing(study, codebook, v2, coded, adjudicator, key_map, needles):
    with pytest.raises(AnnotationError) as caught:
        study_move_codebook(study=study, codebook=v2, key_map=key_map, actor=adjudicator)
    for needle in needles:
        assert needle in str(caught.value)
    _unchanged(study, codebook)


def test_never_to_a_draft_nor_the_same_version_nor_by_save(study, codebook, coded, admin_user, adjudicator):
    draft = codebook_new_version(codebook=codebook, user=admin_user)
    with pytest.raises(AnnotationError, match="is a draft"):
        study_move_codebook(study=study, codebook=draft, key_map={}, actor=adjudicator)
    with pytest.raises(AnnotationError, match="already pins"):
        study_move_codebook(study=study, codebook=codebook, key_map={}, actor=adjudicator)
    study.codebook = draft
    with pytest.raises(FrozenCodebookError, match="a draft"):
        study.save(repin=True)
    study.codebook = codebook_freeze(codebook=draft)
    with pytest.raises(FrozenCodebookError, match="pinned"):
        study.save()
    _unchanged(study, codebook)


def test_move_page_is_for_the_adjudicator_and_admins(study, codebook, v2, coded, adjudicator, admin_user, trio):
    url = f"/annotate/studies/{study.pk}/codebook/"
    post = {"codebook": v2.pk, "key_map": "lossy-handoff -> lost-handoff"}
    annotator = client_for(trio[0])
    assert annotator.get(url).status_code == 403 and annotator.post(url, post).status_code == 403
    _unchanged(study, codebook)
    lead = client_for(adjudicator)
    page = lead.get(url).content.decode()
    assert "Move to another frozen version" in page and f'<option value="{v2.pk}"' in page
    assert "<code>lossy-handoff</code>" in page  # the modes in use, to write the map from
    bad = lead.post(url, post)  # no-assembly-owner, same-file-collision … are used and unmapped
    assert bad.status_code == 422 and "&#x27;same-file-collision&#x27; is used by" in bad.content.decode()
    assert lead.post(url, {**post, "key_map": "lossy-handoff"}).status_code == 422  # not `old -> new`
    _unchanged(study, codebook)
    key_map = "\n".join(f"{old} -> {new if isinstance(new, str) else ', '.join(new)}" for old, new in KEY_MAP.items())
    done = client_for(admin_user).post(url, {"codebook": v2.pk, "key_map": key_map, "note": "v2"})
    assert done.status_code == 302
    study.refresh_from_db()
    assert study.codebook_id == v2.pk
    assert "no-delivery-owner" in lead.get(url).content.decode()
    assert client_for(admin_user).get("/annotate/studies/999/codebook/").status_code == 404


def test_the_coding_page_shows_why_a_run_is_back_and_each_codes_texts(study, codebook, v2, coded, adjudicator):
    r1, r2, r3, r4 = coded
    study_move_codebook(study=study, codebook=v2, key_map=KEY_MAP, actor=adjudicator)
    assignment = r2[1]
    client = client_for(assignment.annotator)
    body = client.get(f"/annotate/{assignment.pk}/").content.decode()
    assert "was split into same-file-overwrite, same-file-conflict" in body
    assert '<details class="code-texts">' in body and "Example that does not fit" in body
    queue = client.get(f"/annotate/?study={study.pk}").content.decode()
    assert "code again: the codebook changed" in queue


def test_the_command_calls_the_same_service(study, codebook, v2, coded, tmp_path, adjudicator):
    from django.core.management import CommandError, call_command

    path = tmp_path / "map.txt"
    path.write_text("lossy-handoff -> lost-handoff\n", encoding="utf-8")
    with pytest.raises(CommandError, match="'same-file-collision' is used by .* nothing was changed"):
        call_command("move_codebook", study.name, "--to", str(v2.pk), "--map", str(path))
    _unchanged(study, codebook)
    lines = [f"{old} -> {new if isinstance(new, str) else ', '.join(new)}" for old, new in KEY_MAP.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = io.StringIO()
    call_command("move_codebook", str(study.pk), "--to", str(v2.pk), "--map", str(path), "--as", "senior", stdout=out)
    assert "5 label(s) carried over, 3 coding(s) reopened" in out.getvalue()
    assert StudyCodebookMove.objects.get().actor_id == adjudicator.pk


def test_pages_that_read_old_snapshots_still_render_after_a_move(study, codebook, v2, coded, adjudicator):
    from annotation.models import Discussion

    r1, r2, r3, r4 = coded
    study_move_codebook(study=study, codebook=v2, key_map=KEY_MAP, actor=adjudicator)
    discussion = Discussion.objects.get(study=study, run=r2[0].run)
    client = client_for(adjudicator)
    assert client.get(f"/annotate/discussions/{discussion.pk}/").status_code == 200
    assert client.get(f"/annotate/studies/{study.pk}/runs/{r2[0].run_id}/history/").status_code == 200
    assert client.get(f"/annotate/studies/{study.pk}/export/labels.csv").status_code == 200
    body = client_for(r2[0].annotator).get(f"/annotate/{r2[0].pk}/").content.decode()
    assert "No Delivery" in body
