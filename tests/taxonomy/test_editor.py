"""The draft editor (create, rename, merge, split, delete) and frozen-means-frozen for bulk writes,
the admin and the CSV; the study codebook's texts and where they come from."""

from __future__ import annotations

import pytest
from django.contrib.admin.sites import site
from django.test import RequestFactory

from taxonomy.models import Code, Codebook, FrozenCodebookError
from taxonomy.services import (
    code_create,
    code_delete,
    code_rename,
    code_split,
    codebook_create_from_specs,
    codebook_csv,
    codebook_import_csv,
    codebook_new_version,
    codes_merge,
)
from taxonomy.tree import TreeError, parse_key_map, parse_parts
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def empty_draft(admin_user):
    return codebook_create_from_specs(name="Fresh", version=1, specs=[], user=admin_user)


@pytest.fixture
def draft(codebook, admin_user):
    return codebook_new_version(codebook=codebook, user=admin_user)


def _tree(codebook: Codebook) -> list[tuple[str, str, str]]:
    return [
        (c.key, c.level, c.parent.key if c.parent else "")
        for c in codebook.codes.select_related("parent").order_by("position")
    ]


def test_an_empty_draft_gets_categories_subcategories_and_modes_in_tree_order(empty_draft, admin_user):
    code_create(codebook=empty_draft, level="category", name="Planning", user=admin_user)
    code_create(codebook=empty_draft, level="category", name="Merging")
    code_create(codebook=empty_draft, level="subcategory", name="Owners", parent_key="planning")
    code_create(codebook=empty_draft, level="mode", name="No Owner", parent_key="owners", definition="Nobody owns it.")
    code_create(codebook=empty_draft, level="subcategory", name="Conflicts", parent_key="merging")
    code_create(codebook=empty_draft, level="mode", name="Lost Write", key="lost", parent_key="conflicts")
    assert _tree(empty_draft) == [
        ("planning", "category", ""),
        ("owners", "subcategory", "planning"),
        ("no-owner", "mode", "owners"),
        ("merging", "category", ""),
        ("conflicts", "subcategory", "merging"),
        ("lost", "mode", "conflicts"),
    ]
    empty_draft.refresh_from_db()
    assert "added mode lost under conflicts" in empty_draft.change_log


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"level": "mode", "name": "X", "parent_key": "nope"}, "'nope' is not a key"),
        ({"level": "mode", "name": "X", "parent_key": "task-orchestration-problems"}, "must be a subcategory"),
        ({"level": "subcategory", "name": "X"}, "needs a parent category"),
        ({"level": "category", "name": "X", "parent_key": "missing-owner"}, "a category has no parent"),
        ({"level": "mode", "name": "Same-File Collision", "parent_key": "missing-owner"}, "'same-file-c.* is already"),
        ({"level": "mode", "name": "X", "key": "Bad Key", "parent_key": "missing-owner"}, "'Bad Key' must be"),
        ({"level": "episode", "name": "X"}, "level must be one of"),
        ({"level": "category", "name": "  "}, "name is empty"),
    ],
)  # fmt: skip
def test_create_refuses_bad_input_naming_the_key(draft, kwargs, needle):
    before = draft.codes.count()
    with pytest.raises(TreeError, match=needle):
        code_create(codebook=draft, **kwargs)
    assert draft.codes.count() == before


def test_nothing_changes_in_a_frozen_codebook(codebook):
    code = codebook.codes.get(key="missing-owner")
    for write in (
        lambda: code_create(codebook=codebook, level="category", name="New"),
        lambda: code_rename(code=code, name="Renamed"),
        lambda: codes_merge(codebook=codebook, keys=["missing-owner", "load-imbalance"], into="missing-owner"),
        lambda: code_split(code=codebook.codes.get(key="no-assembly-owner"), parts=[("a", "A"), ("b", "B")]),
        lambda: code_delete(code=codebook.codes.get(key="no-assembly-owner")),
        lambda: Codebook.objects.filter(pk=codebook.pk).delete(),
        lambda: Codebook.objects.filter(pk=codebook.pk).update(name="x"),
        lambda: Code.objects.filter(codebook=codebook).update(name="x"),
        lambda: Code.objects.filter(codebook=codebook, level="mode").delete(),
    ):
        with pytest.raises(FrozenCodebookError):
            write()
    assert codebook.codes.count() == 49 and not codebook.codes.filter(name="x").exists()


def test_rename_changes_name_and_key(draft):
    code = code_rename(code=draft.codes.get(key="missing-owner"), name="Unowned Work", key="unowned-work")
    assert (code.key, code.name) == ("unowned-work", "Unowned Work")
    assert draft.codes.get(key="no-implementation-owner").parent_id == code.pk
    with pytest.raises(TreeError, match="'load-imbalance' is already used"):
        code_rename(code=code, name="Unowned Work", key="load-imbalance")
    assert draft.codes.filter(key="unowned-work").exists()


def test_merge_subcategories_moves_children_and_repoints_open_codes(draft, study, trio):
    from annotation.models import OpenCode, PilotRound

    pilot = PilotRound.objects.create(name="P")
    run = study.runs.first()
    promoted = OpenCode.objects.create(
        pilot=pilot, run=run, annotator=trio[0], text="t", promoted_to=draft.codes.get(key="pseudo-concurrency")
    )
    modes_before = set(draft.codes.filter(level="mode").values_list("key", flat=True))
    target = codes_merge(
        codebook=draft, keys=["load-imbalance", "pseudo-concurrency"], into="scheduling", name="Scheduling"
    )
    assert (target.level, target.parent.key) == ("subcategory", "task-orchestration-problems")
    assert not draft.codes.filter(key__in=["load-imbalance", "pseudo-concurrency"]).exists()
    assert set(target.children.values_list("key", flat=True)) == {
        "preflight-gated-work", "serial-investigation", "critical-path-starvation", "fan-out-budget-exhaustion",
        "oversized-child-task",
    }  # fmt: skip
    assert set(draft.codes.filter(level="mode").values_list("key", flat=True)) == modes_before
    promoted.refresh_from_db()
    assert promoted.promoted_to_id == target.pk
    draft.refresh_from_db()
    assert "merged load-imbalance, pseudo-concurrency into scheduling" in draft.change_log


def test_merge_into_one_of_them_keeps_it(draft):
    target = codes_merge(codebook=draft, keys=["no-assembly-owner", "no-pipeline-owner"], into="no-pipeline-owner")
    assert target.key == "no-pipeline-owner" and not draft.codes.filter(key="no-assembly-owner").exists()


@pytest.mark.parametrize(
    "keys,into,name,needle",
    [
        (["missing-owner", "no-assembly-owner"], "missing-owner", "", "different levels"),
        (["missing-owner", "ghost"], "missing-owner", "", "'ghost' is not a key"),
        (["missing-owner"], "missing-owner", "", "at least two"),
        (["missing-owner", "load-imbalance"], "brand-new", "", "'brand-new' is a new code: give it a name"),
        (["missing-owner", "load-imbalance"], "no-assembly-owner", "X", "'no-assembly-owner' is already used"),
    ],
)
def test_merge_refuses_bad_input_and_writes_nothing(draft, keys, into, name, needle):
    before = _tree(draft)
    with pytest.raises(TreeError, match=needle):
        codes_merge(codebook=draft, keys=keys, into=into, name=name)
    assert _tree(draft) == before


def test_split_a_subcategory_distributes_its_children(draft):
    parts = code_split(
        code=draft.codes.get(key="load-imbalance"),
        parts=[("critical-path", "Critical Path"), ("budget", "Budget")],
        children={
            "critical-path-starvation": "critical-path",
            "oversized-child-task": "critical-path",
            "fan-out-budget-exhaustion": "budget",
        },
    )
    assert [p.key for p in parts] == ["critical-path", "budget"]
    assert not draft.codes.filter(key="load-imbalance").exists()
    assert sorted(parts[0].children.values_list("key", flat=True)) == [
        "critical-path-starvation",
        "oversized-child-task",
    ]
    keys = [k for k, _, _ in _tree(draft)]
    assert keys.index("critical-path") < keys.index("critical-path-starvation") < keys.index("budget")


def test_split_a_mode_keeping_its_key(draft):
    parts = code_split(
        code=draft.codes.get(key="same-file-collision"),
        parts=[("same-file-collision", "Same-File Collision"), ("same-line-collision", "Same-Line Collision")],
    )
    assert [p.level for p in parts] == ["mode", "mode"] and parts[1].parent_id == parts[0].parent_id


@pytest.mark.parametrize(
    "parts,children,needle",
    [
        ([("a", "A"), ("b", "B")], {"critical-path-starvation": "a"}, "say which part .*fan-out-budget-exhaustion"),
        ([("a", "A"), ("b", "B")], {"ghost": "a"}, "'ghost' is not a child"),
        ([("a", "A")], {}, "at least two"),
        ([("a", "A"), ("a", "A again")], {}, "'a' is already used"),
        ([("a", "A"), ("b", "B")], {"critical-path-starvation": "c"}, "'c', which is not one of the parts"),
    ],
)  # fmt: skip
def test_split_refuses_bad_input_and_writes_nothing(draft, parts, children, needle):
    before = _tree(draft)
    with pytest.raises(TreeError, match=needle):
        code_split(code=draft.codes.get(key="load-imbalance"), parts=parts, children=children)
    assert _tree(draft) == before


def test_delete_only_a_code_without_children(draft):
    with pytest.raises(TreeError, match="'missing-owner' still has 4 code"):
        code_delete(code=draft.codes.get(key="missing-owner"))
    code_delete(code=draft.codes.get(key="no-assembly-owner"))
    assert not draft.codes.filter(key="no-assembly-owner").exists()


def test_parsers_name_the_line():
    assert parse_parts("a: A\n\nB b\n") == [("a", "A"), ("b-b", "B b")]
    assert parse_key_map("x -> y\nz -> p, q  # a split\n") == {"x": ["y"], "z": ["p", "q"]}
    with pytest.raises(TreeError, match="line 2"):
        parse_key_map("x -> y\nz\n")
    with pytest.raises(TreeError, match="'x' is mapped twice"):
        parse_key_map("x -> y\nx -> z\n")


# -- the editor page ------------------------------------------------------------------------


def test_editor_page_for_admins_only(draft, codebook, annotator_client, admin_client_, adjudicator):
    url = f"/codebooks/{draft.pk}/edit/"
    assert annotator_client.get(url).status_code == 403
    post = {"op": "create", "level": "category", "name": "Sneaky"}
    assert annotator_client.post(url, post).status_code == 403
    assert client_for(adjudicator).post(url, post).status_code == 403
    assert not draft.codes.filter(key="sneaky").exists()
    body = admin_client_.get(url).content.decode()
    assert "Merge codes" in body and "same-file-collision" in body
    frozen = admin_client_.get(f"/codebooks/{codebook.pk}/edit/")
    assert frozen.status_code == 302 and frozen["Location"] == f"/codebooks/{codebook.pk}/"
    # a change posted to a frozen codebook is refused as a conflict, and says why; by htmx, the page goes there
    refused = admin_client_.post(f"/codebooks/{codebook.pk}/edit/", post)
    assert refused.status_code == 409 and "Nothing was changed" in refused.content.decode()
    by_htmx = admin_client_.post(f"/codebooks/{codebook.pk}/edit/", post, HTTP_HX_REQUEST="true")
    assert by_htmx["HX-Redirect"] == f"/codebooks/{codebook.pk}/"
    assert not codebook.codes.filter(key="sneaky").exists()
    assert admin_client_.get("/codebooks/999/edit/").status_code == 404


def test_editor_operations_through_the_page(empty_draft, admin_client_):
    url = f"/codebooks/{empty_draft.pk}/edit/"
    response = admin_client_.post(url, {"op": "create", "level": "category", "name": "Planning"})
    assert response.status_code == 302
    hx = {"HTTP_HX_REQUEST": "true"}
    response = admin_client_.post(
        url, {"op": "create", "level": "subcategory", "name": "Owners", "parent_key": "planning"}, **hx
    )
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body and "Added subcategory Owners (owners)." in body
    for name in ("A", "B"):
        admin_client_.post(url, {"op": "create", "level": "mode", "name": name, "parent_key": "owners"})
    admin_client_.post(url, {"op": "merge", "keys": "a, b", "into": "ab", "name": "A or B"})
    admin_client_.post(
        url, {"op": "split", "key": "owners", "parts": "own-a: Own A\nown-b: Own B", "children": "ab -> own-b"}
    )
    code = empty_draft.codes.get(key="ab")
    admin_client_.post(
        url, {"op": "update", "code": code.pk, "name": "A/B", "key": "a-b", "negative_example": "Not this.",
              "source": "Parallax"},
    )  # fmt: skip
    code.refresh_from_db()
    assert (code.key, code.name, code.parent.key, code.negative_example, code.source) == (
        "a-b", "A/B", "own-b", "Not this.", "Parallax",
    )  # fmt: skip
    assert _tree(empty_draft) == [
        ("planning", "category", ""),
        ("own-a", "subcategory", "planning"),
        ("own-b", "subcategory", "planning"),
        ("a-b", "mode", "own-b"),
    ]
    admin_client_.post(url, {"op": "delete", "code": empty_draft.codes.get(key="own-a").pk})
    assert not empty_draft.codes.filter(key="own-a").exists()


def test_editor_bad_input_is_422_naming_the_key_and_changes_nothing(draft, admin_client_):
    url = f"/codebooks/{draft.pk}/edit/"
    before = _tree(draft)
    response = admin_client_.post(url, {"op": "merge", "keys": "missing-owner ghost", "into": "missing-owner"})
    assert response.status_code == 422
    assert "&#x27;ghost&#x27; is not a key" in response.content.decode()
    code = draft.codes.get(key="missing-owner")
    response = admin_client_.post(
        url, {"op": "update", "code": code.pk, "name": "Renamed", "key": "load-imbalance", "definition": "new"}
    )
    assert response.status_code == 422
    code.refresh_from_db()
    assert (code.name, code.key) == ("Missing Owner", "missing-owner") and code.definition != "new"
    assert admin_client_.post(url, {"op": "explode"}).status_code == 422
    assert _tree(draft) == before


# -- admin, CSV, the study codebook's texts -----------------------------------------------------


def test_admin_offers_no_bulk_delete_and_no_frozen_codebook_for_new_codes(codebook, draft, admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    for model in (Codebook, Code):
        assert "delete_selected" not in site._registry[model].get_actions(request)
    client = client_for(admin_user)
    response = client.post(
        "/admin/taxonomy/codebook/",
        {"action": "delete_selected", "_selected_action": [codebook.pk], "post": "yes"},
    )
    assert response.status_code in (200, 302) and Codebook.objects.filter(pk=codebook.pk).exists()
    form = client.get("/admin/taxonomy/code/add/").content.decode()
    assert f'<option value="{draft.pk}">' in form and f'<option value="{codebook.pk}">' not in form
    assert (
        "Positive example" in client.get(f"/admin/taxonomy/code/{codebook.codes.first().pk}/change/").content.decode()
    )


def test_csv_carries_examples_and_source_and_reads_the_old_example_column(draft):
    code = draft.codes.get(key="same-file-collision")
    code.positive_example, code.negative_example, code.source = "fits", "does not fit", "Parallax"
    code.save()
    text = codebook_csv(draft)
    again = codebook_import_csv(text=text, name="Copy")
    copy = again.codes.get(key="same-file-collision")
    assert (copy.positive_example, copy.negative_example, copy.source) == ("fits", "does not fit", "Parallax")
    old = "key,level,parent_key,path,name,definition,inclusion,exclusion,example,codebook,version\n"
    old += "c,category,,,C,,,,,Old,1\ns,subcategory,c,,S,,,,,Old,1\nm,mode,s,,M,,,,the old example,Old,1\n"
    legacy = codebook_import_csv(text=old)
    assert legacy.codes.get(key="m").positive_example == "the old example"
    both = old.replace("example,codebook", "example,positive_example,codebook").replace(",Old,1", ",,Old,1")
    with pytest.raises(TreeError, match="column 'example'"):
        codebook_import_csv(text=both, name="Both")


def test_study_codebook_says_which_texts_are_published(codebook):
    modes = list(codebook.codes.filter(level="mode"))
    assert all(m.source.startswith("definition: Parallax") for m in codebook.codes.all())
    published = [m for m in modes if "published, verbatim (nl2repo/dictdatabase/codex/review.json" in m.source]
    assert len(published) == 32
    assert sum(bool(m.negative_example) for m in modes) == 31
    overwrite = codebook.codes.get(key="final-tree-overwrite")
    assert overwrite.positive_example.startswith("A live child broadly copied upstream source into /workspace")
    assert "positive example: published" in overwrite.source


def test_study_codebook_examples_are_the_published_words(codebook):
    """Each published text is the record's own (review.json of the study's one published pair)."""
    import json

    from tests.factories import REAL

    review = json.loads((REAL / "paper-annotations/nl2repo__dictdatabase__codex/review.json").read_text())
    reasons = {c["third_label"]: c["reason"] for t in review["taxonomy_decisions"] for c in t["candidates"]}
    for mode in codebook.codes.filter(level="mode"):
        assert reasons[mode.name] in (mode.positive_example, mode.negative_example)
