from __future__ import annotations

import json

import pytest

from taxonomy.models import Code, Codebook, FrozenCodebookError
from taxonomy.services import (
    code_update,
    codebook_csv,
    codebook_import_csv,
    codebook_load_default,
    codebook_new_version,
)
from taxonomy.tree import CSV_COLUMNS, TreeError
from tests.factories import REAL

pytestmark = pytest.mark.django_db


def test_default_codebook_has_the_study_shape_and_published_names(codebook):
    counts = {lvl: codebook.codes.filter(level=lvl).count() for lvl in ("category", "subcategory", "mode")}
    assert counts == {"category": 4, "subcategory": 13, "mode": 32}
    assert codebook.is_frozen
    review = json.loads((REAL / "paper-annotations/nl2repo__dictdatabase__codex/review.json").read_text())
    published = {
        (t["top_label"], t["sub_label"], c["third_label"])
        for t in review["taxonomy_decisions"]
        for c in t["candidates"]
    }
    ours = {
        (m.parent.parent.name, m.parent.name, m.name)
        for m in codebook.codes.filter(level="mode").select_related("parent__parent")
    }
    assert ours == published
    assert all(c.definition for c in codebook.codes.all())


def test_loading_twice_is_idempotent(codebook):
    assert codebook_load_default().pk == codebook.pk
    assert Codebook.objects.count() == 1


def test_frozen_codebook_cannot_change(codebook):
    code = codebook.codes.first()
    with pytest.raises(FrozenCodebookError):
        code_update(code=code, definition="changed")
    code.definition = "sneaky"
    with pytest.raises(FrozenCodebookError):
        code.save()
    assert Code.objects.get(pk=code.pk).definition != "sneaky"


def test_new_version_keeps_keys_and_links_parent(codebook):
    draft = codebook_new_version(codebook=codebook, change_log="clarify definitions")
    assert (draft.version, draft.parent_id, draft.status) == (2, codebook.pk, "draft")
    assert set(draft.codes.values_list("key", flat=True)) == set(codebook.codes.values_list("key", flat=True))
    code = draft.codes.get(key="same-file-collision")
    code_update(code=code, definition="new wording")
    assert codebook.codes.get(key="same-file-collision").definition != "new wording"


def test_csv_round_trip_is_identical(codebook):
    text = codebook_csv(codebook)
    lines = text.strip().splitlines()
    assert lines[0] == (
        "key,level,parent_key,path,name,definition,inclusion,exclusion,positive_example,negative_example,source,"
        "codebook,version"
    )
    assert len(lines) == 1 + 4 + 13 + 32
    assert "Shared State and Merge Problems > Concurrent Writes > Final-Tree Overwrite" in text
    # The same file under another name (the frozen original can never be deleted to make room).
    text = text.replace(",Dynamic-concurrency failure modes,1\n", ",Copy,1\n")
    again = codebook_import_csv(text=text)
    assert again.name == "Copy" and codebook_csv(again) == text


def test_csv_import_rejects_bad_rows_with_row_numbers_and_stores_nothing(codebook):
    text = codebook_csv(codebook).replace(
        ",subcategory,task-orchestration-problems,", ",subcategory,no-such-parent,", 1
    )
    with pytest.raises(TreeError, match=r"row 3, column 'parent_key'"):
        codebook_import_csv(text=text, name="Broken")
    assert not Codebook.objects.filter(name="Broken").exists()
    assert Code.objects.filter(codebook__name="Broken").count() == 0


@pytest.mark.parametrize(
    "row,needle",
    [
        ("Bad Key,mode,x,,X,,,,,,,C,1", "column 'key'"),
        ("ok,level9,,,X,,,,,,,C,1", "column 'level'"),
        (
            "cat,category,,,Cat,,,,,,,C,1\nsub,subcategory,cat,,Sub,,,,,,,C,1\nm,mode,cat,,M,,,,,,,C,1",
            "must be a subcategory",
        ),
        ("cat,category,,,Cat,,,,,,,C,1\ncat,category,,,Cat,,,,,,,C,1", "duplicate key"),
    ],
)
def test_csv_import_errors(row, needle):
    header = ",".join(CSV_COLUMNS) + "\n"
    with pytest.raises(TreeError, match=needle):
        codebook_import_csv(text=header + row + "\n")
    assert Codebook.objects.count() == 0


def test_any_codebook_shape_imports():
    header = ",".join(CSV_COLUMNS) + "\n"
    rows = [
        "a,category,,,A,,,,,,,Tiny,3",
        "a1,subcategory,a,,A1,,,,,,,Tiny,3",
        "x,mode,a1,,X,,,,,,,Tiny,3",
        "b,category,,,B,,,,,,,Tiny,3",
        "b1,subcategory,b,,B1,,,,,,,Tiny,3",
        "y,mode,b1,,Y,,,,,,,Tiny,3",
        "z,mode,b1,,Z,,,,,,,Tiny,3",
    ]
    cb = codebook_import_csv(text=header + "\n".join(rows) + "\n")
    assert (cb.name, cb.version, cb.codes.filter(level="mode").count()) == ("Tiny", 3, 3)


def test_codebook_pages(annotator_client, admin_client_, codebook):
    assert annotator_client.get("/codebooks/").status_code == 200
    body = annotator_client.get(f"/codebooks/{codebook.pk}/").content.decode()
    assert "4 categories · 13 subcategories · 32 modes" in body and "Final-Tree Overwrite" in body
    csv_response = annotator_client.get(f"/codebooks/{codebook.pk}/export.csv")
    assert csv_response["Content-Type"].startswith("text/csv")
    assert annotator_client.post(f"/codebooks/{codebook.pk}/new-version/").status_code == 403
    assert admin_client_.post(f"/codebooks/{codebook.pk}/new-version/").status_code == 302
    assert Codebook.objects.filter(version=2).exists()
    assert annotator_client.get("/codebooks/999/").status_code == 404


def test_codebook_csv_upload_page(admin_client_, annotator_client, codebook):
    from django.core.files.uploadedfile import SimpleUploadedFile

    assert annotator_client.get("/codebooks/import/").status_code == 403
    bad = SimpleUploadedFile("cb.csv", b"key,level\nx,mode\n")
    response = admin_client_.post("/codebooks/import/", {"file": bad})
    assert response.status_code == 422 and "missing column" in response.content.decode()
    good = SimpleUploadedFile("cb.csv", codebook_csv(codebook).encode())
    response = admin_client_.post("/codebooks/import/", {"file": good, "name": "Copy"})
    assert response.status_code == 302 and Codebook.objects.get(name="Copy").codes.count() == 49


def test_frozen_means_frozen_in_the_admin_and_the_models(admin_user, codebook, trio, adjudicator):
    """A frozen codebook cannot be edited or deleted through the admin or the models, and a study
    cannot be pinned to a draft or re-pinned."""
    from annotation.models import Study
    from annotation.services.studies import study_create
    from taxonomy.models import Code, FrozenCodebookError
    from taxonomy.services import codebook_new_version
    from tests.factories import client_for

    assert codebook.is_frozen
    client = client_for(admin_user)
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    change = f"/admin/taxonomy/codebook/{codebook.pk}/change/"
    posted = client.post(change, {"name": "renamed", "version": 99, "description": "x"})
    assert posted.status_code == 403
    assert client.post(f"/admin/taxonomy/codebook/{codebook.pk}/delete/", {"post": "yes"}).status_code == 403
    code = codebook.codes.first()
    assert client.post(f"/admin/taxonomy/code/{code.pk}/delete/", {"post": "yes"}).status_code == 403
    codebook.refresh_from_db()
    assert codebook.name != "renamed" and codebook.codes.count() == 49
    for write in (lambda: codebook.save(), lambda: codebook.delete(), lambda: code.delete()):
        with pytest.raises(FrozenCodebookError):
            write()
    draft = codebook_new_version(codebook=codebook, user=admin_user)
    study = study_create(name="S", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    study.codebook = draft
    with pytest.raises(FrozenCodebookError, match="a draft"):
        study.save()
    with pytest.raises(FrozenCodebookError, match="a draft"):
        Study.objects.create(name="T", codebook=draft, adjudicator=adjudicator)
    form = client.get(f"/admin/annotation/study/{study.pk}/change/").content.decode()
    assert 'name="codebook"' not in form  # shown, not editable
    assert Code.objects.filter(codebook=codebook).count() == 49


def test_codebook_csv_is_spreadsheet_safe_and_still_round_trips(codebook, admin_user):
    from taxonomy.models import Codebook
    from taxonomy.services import code_update, codebook_csv, codebook_import_csv, codebook_new_version

    draft = codebook_new_version(codebook=codebook, user=admin_user)
    code = draft.codes.get(key="same-file-collision")
    code_update(code=code, definition='=HYPERLINK("http://evil")', negative_example="-- a bullet")
    text = codebook_csv(draft)
    assert "'=HYPERLINK" in text and "'-- a bullet" in text
    Codebook.objects.filter(pk=draft.pk).delete()  # a draft can go (a fresh database, for the test)
    again = codebook_import_csv(text=text)
    assert again.codes.get(key="same-file-collision").definition == '=HYPERLINK("http://evil")'
    assert codebook_csv(again) == text


def test_a_second_draft_of_a_codebook_is_refused_naming_the_open_one(admin_client_, codebook):
    """'New version' while a draft is open would fork the next version: it is refused, names the draft and opens
    it; once that draft is frozen, the next version is made."""
    from taxonomy.models import OpenDraftError
    from taxonomy.services import codebook_freeze, codebook_new_version

    draft = codebook_new_version(codebook=codebook)
    with pytest.raises(OpenDraftError, match=f"v{draft.version}"):
        codebook_new_version(codebook=codebook)
    response = admin_client_.post(f"/codebooks/{codebook.pk}/new-version/", follow=True)
    assert response.redirect_chain[-1][0] == f"/codebooks/{draft.pk}/"
    assert "still being edited" in response.content.decode()
    assert Codebook.objects.filter(name=codebook.name, status="draft").count() == 1
    codebook_freeze(codebook=draft)
    assert codebook_new_version(codebook=draft).version == draft.version + 1
