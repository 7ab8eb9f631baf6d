from __future__ import annotations

import pytest

from annotation.errors import AnnotationError
from annotation.models import OpenCode
from annotation.selectors.pilot import pilot_groups
from annotation.services.pilot import Promotion, open_codes_set, pilot_create, pilot_promote
from tests.conftest import client_for

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
