from __future__ import annotations

import pytest

from annotation.errors import AnnotationError
from annotation.models import OpenCode
from annotation.selectors.pilot import pilot_groups
from annotation.services.pilot import Promotion, open_codes_set, pilot_create, pilot_open_draft, pilot_promote
from taxonomy.models import Codebook
from taxonomy.services import codebook_freeze
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def pilot(study, trio, codebook):
    return pilot_create(name="P1", annotators=trio[:2], base_codebook=codebook, size=4, seed=1)


def test_pilot_sample_and_two_annotators(pilot, trio, codebook):
    assert pilot.runs.count() == 4
    with pytest.raises(AnnotationError, match="two annotators"):
        pilot_create(name="P2", annotators=trio, base_codebook=codebook)


def test_open_codes_group_and_promote_with_mapping(pilot, trio):
    run_a, run_b = list(pilot.runs.order_by("pk"))[:2]
    open_codes_set(pilot=pilot, run_id=run_a.pk, annotator=trio[0], texts=["Parent idles  while children run", ""])
    open_codes_set(
        pilot=pilot, run_id=run_b.pk, annotator=trio[1], texts=["parent idles while children run", "Duplicate reads"]
    )
    groups = pilot_groups(pilot=pilot)
    assert [(g.key, g.count, len(g.runs)) for g in groups] == [
        ("parent idles while children run", 2, 2),
        ("duplicate reads", 1, 1),
    ]
    codebook = pilot_promote(
        pilot=pilot,
        promotions=[
            Promotion(
                group_keys=["parent idles while children run"],
                name="Idle Parent Wait",
                parent_key="no-active-parent-monitoring",
                definition="The parent waits without working.",
            )
        ],
    )
    assert codebook.status == "draft" and codebook.parent == pilot.base_codebook and codebook.version == 2
    assert codebook.codes.filter(level="mode").count() == 33
    promoted = OpenCode.objects.filter(promoted_to__isnull=False)
    assert promoted.count() == 2 and {c.promoted_to.key for c in promoted} == {"idle-parent-wait"}
    with pytest.raises(AnnotationError, match="already promoted"):
        open_codes_set(pilot=pilot, run_id=run_a.pk, annotator=trio[0], texts=["changed"])


def test_only_pilot_annotators_and_pilot_runs(pilot, trio, study):
    with pytest.raises(AnnotationError):
        open_codes_set(pilot=pilot, run_id=pilot.runs.first().pk, annotator=trio[2], texts=["x"])
    outside = study.runs.exclude(pk__in=pilot.runs.values("pk")).first()
    with pytest.raises(AnnotationError):
        open_codes_set(pilot=pilot, run_id=outside.pk, annotator=trio[0], texts=["x"])


def test_pilot_pages(pilot, trio, admin_user):
    run = pilot.runs.first()
    client = client_for(trio[0])
    assert client.get(f"/annotate/pilot/{pilot.pk}/").status_code == 200
    response = client.post(f"/annotate/pilot/{pilot.pk}/runs/{run.pk}/", {"codes": "a\nb", "memo": "m"})
    assert response.status_code == 302 and OpenCode.objects.filter(annotator=trio[0]).count() == 2
    assert client_for(trio[2]).get(f"/annotate/pilot/{pilot.pk}/").status_code == 404
    assert client.get(f"/annotate/pilot/{pilot.pk}/consolidate/").status_code == 403
    admin = client_for(admin_user)
    assert "a" in admin.get(f"/annotate/pilot/{pilot.pk}/consolidate/").content.decode()
    response = admin.post(
        f"/annotate/pilot/{pilot.pk}/promote/", {"group": ["a"], "name": "New Mode", "parent_key": "load-imbalance"}
    )
    assert response.status_code == 302
    assert OpenCode.objects.get(text="a").promoted_to.name == "New Mode"


def test_promotions_accumulate_in_one_draft(pilot, trio, codebook):
    run_a, run_b = list(pilot.runs.order_by("pk"))[:2]
    open_codes_set(pilot=pilot, run_id=run_a.pk, annotator=trio[0], texts=["idle parent", "lost notes"])
    first = pilot_promote(pilot=pilot, promotions=[Promotion(["idle parent"], "Idle Parent", "load-imbalance")])
    second = pilot_promote(pilot=pilot, promotions=[Promotion(["lost notes"], "Lost Notes", "missing-owner")])
    assert first.pk == second.pk and second.version == 2 and second.parent_id == codebook.pk
    assert set(second.codes.filter(key__in=["idle-parent", "lost-notes"]).values_list("key", flat=True)) == {
        "idle-parent",
        "lost-notes",
    }
    assert second.codes.filter(level="mode").count() == 34
    assert Codebook.objects.filter(name=codebook.name).count() == 2  # v1 and the one draft
    # A bad promotion (an unknown parent) stores nothing, not even its open codes' mapping.
    open_codes_set(pilot=pilot, run_id=run_b.pk, annotator=trio[1], texts=["ghost"])
    with pytest.raises(AnnotationError, match="'nowhere' is not a key"):
        pilot_promote(pilot=pilot, promotions=[Promotion(["ghost"], "Ghost", "nowhere")])
    assert not second.codes.filter(key="ghost").exists()
    assert OpenCode.objects.get(text="ghost").promoted_to is None
    with pytest.raises(AnnotationError, match="would repeat key 'idle-parent'"):
        pilot_promote(pilot=pilot, promotions=[Promotion(["ghost"], "Idle Parent", "load-imbalance")])


def test_a_frozen_draft_is_continued_in_a_new_one(pilot, trio):
    run = pilot.runs.first()
    open_codes_set(pilot=pilot, run_id=run.pk, annotator=trio[0], texts=["one", "two"])
    first = pilot_promote(pilot=pilot, promotions=[Promotion(["one"], "First Mode", "load-imbalance")])
    codebook_freeze(codebook=first)
    second = pilot_promote(pilot=pilot, promotions=[Promotion(["two"], "Second Mode", "load-imbalance")])
    assert second.pk != first.pk and second.parent_id == first.pk and second.version == 3
    assert second.codes.filter(key__in=["first-mode", "second-mode"]).count() == 2


def test_pilot_without_base_codebook_builds_its_tree_on_the_web(study, trio, admin_user):
    pilot = pilot_create(name="Open", annotators=trio[:2], size=2, seed=2)
    run = pilot.runs.first()
    open_codes_set(pilot=pilot, run_id=run.pk, annotator=trio[0], texts=["waits", "plans"])
    admin = client_for(admin_user)
    assert client_for(trio[0]).post(f"/annotate/pilot/{pilot.pk}/draft/").status_code == 403
    response = admin.post(f"/annotate/pilot/{pilot.pk}/draft/")
    pilot.refresh_from_db()
    draft = pilot.result_codebook
    assert response.status_code == 302 and response["Location"] == f"/codebooks/{draft.pk}/edit/"
    assert (draft.name, draft.status, draft.codes.count()) == ("Pilot: Open", "draft", 0)
    edit = f"/codebooks/{draft.pk}/edit/"
    admin.post(edit, {"op": "create", "level": "category", "name": "Coordination"})
    admin.post(edit, {"op": "create", "level": "subcategory", "name": "Waiting", "parent_key": "coordination"})
    page = admin.get(f"/annotate/pilot/{pilot.pk}/consolidate/").content.decode()
    assert 'value="waiting"' in page and "Promotions add to" in page
    admin.post(
        f"/annotate/pilot/{pilot.pk}/promote/", {"group": ["waits"], "name": "Idle Wait", "parent_key": "waiting"}
    )
    admin.post(
        f"/annotate/pilot/{pilot.pk}/promote/",
        {"group": ["plans"], "name": "Planning", "level": "subcategory", "parent_key": "coordination"},
    )
    assert [c.key for c in draft.codes.order_by("position")] == ["coordination", "waiting", "idle-wait", "planning"]
    assert OpenCode.objects.get(text="waits").promoted_to.key == "idle-wait"
    assert Codebook.objects.filter(name="Pilot: Open").count() == 1


def test_two_pilots_on_one_codebook_promote_into_its_one_next_version(pilot, trio, codebook, admin_user):
    """A second pilot on the same base codebook (or a draft made by hand) does not fork the next version: its
    promotions go into the draft already open, and the admin's page opens it rather than failing."""
    from tests.factories import client_for

    other = pilot_create(name="P-other", annotators=trio[1:], base_codebook=codebook)
    first = pilot_open_draft(pilot=pilot)
    assert pilot_open_draft(pilot=other).pk == first.pk
    response = client_for(admin_user).post(f"/annotate/pilot/{other.pk}/draft/")
    assert response.status_code == 302 and response["Location"].endswith(f"/{first.pk}/edit/")
    assert Codebook.objects.filter(name=codebook.name, status="draft").count() == 1
