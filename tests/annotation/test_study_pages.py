"""Designing and managing a study on the web: the new-study form, the design page and its changes,
who may use them, and what a refusal looks like."""

from __future__ import annotations

from collections import Counter

import pytest

from accounts.roles import ANNOTATOR
from activity.models import ActivityEntry
from annotation.models import Assignment, Study
from tests.factories import client_for, more_pairs, new_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def quad(trio):
    return [*trio, new_user("coder4", ANNOTATOR)]


def _new(client, codebook, annotators, adjudicator, **extra):
    data = {"name": "Second study", "codebook": codebook.pk, "adjudicator": adjudicator.pk, "coders_per_run": 3,
            "seed": 7, "annotators": [a.pk for a in annotators], "assign_now": "on", **extra}  # fmt: skip
    return client.post("/annotate/studies/new/", data)


def test_an_adjudicator_designs_a_three_of_four_study(study, codebook, quad, adjudicator):
    client = client_for(adjudicator)
    page = client.get("/annotate/studies/new/")
    assert page.status_code == 200 and b"coder4" in page.content
    response = _new(client, codebook, quad, adjudicator, benchmark=["LoopsBench"])
    created = Study.objects.get(name="Second study")
    assert response.status_code == 302 and response["Location"] == f"/annotate/studies/{created.pk}/manage/"
    assert (created.coders_per_run, created.seed, created.annotators.count()) == (3, 7, 4)
    assert set(created.runs.values_list("task__benchmark__name", flat=True)) == {"LoopsBench"}
    per_run = Counter(Assignment.objects.filter(study=created).values_list("run_id", flat=True))
    assert len(per_run) == 3 and set(per_run.values()) == {3}
    manage = client.get(f"/annotate/studies/{created.pk}/manage/")
    assert manage.status_code == 200 and b"Coders per run (k)" in manage.content


def test_the_run_count_preview_is_a_fragment(study, adjudicator):
    response = client_for(adjudicator).get(
        "/annotate/studies/new/", {"preview": "1", "agent": ["Codex"]}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200 and b"<html" not in response.content
    assert b"<strong>3</strong> runs match" in response.content
    bad = client_for(adjudicator).get("/annotate/studies/new/", {"preview": "1", "run_ids": "12 x"})
    assert b"Check the run ids" in bad.content


def test_a_bad_design_is_refused_on_its_field_and_nothing_is_created(study, codebook, trio, adjudicator):
    client = client_for(adjudicator)
    response = _new(client, codebook, trio, adjudicator, coders_per_run=4)
    assert response.status_code == 422
    assert b"coders per run must be between 2 and the 3 annotators, not 4" in response.content
    response = _new(client, codebook, trio, adjudicator, name="S")
    assert response.status_code == 422 and b"a study named" in response.content
    response = _new(client, codebook, trio, adjudicator, benchmark=["LoopsBench"], run_ids="999999")
    assert response.status_code == 422 and b"no run matches the filters" in response.content
    response = _new(client, codebook, trio, adjudicator, run_ids="1, two")
    assert response.status_code == 422 and b"not a run id: two" in response.content
    assert list(Study.objects.values_list("name", flat=True)) == ["S"]


def test_who_may_design_and_manage(study, codebook, trio, adjudicator, annotator):
    assert client_for(annotator).get("/annotate/studies/new/").status_code == 403
    assert _new(client_for(trio[0]), codebook, trio, adjudicator).status_code == 403
    stranger = new_user("senior2", "adjudicator")
    assert client_for(stranger).get(f"/annotate/studies/{study.pk}/manage/").status_code == 403
    change = client_for(stranger).post(f"/annotate/studies/{study.pk}/manage/change/", {"action": "close"})
    assert change.status_code == 403
    assert (
        client_for(trio[0]).post(f"/annotate/studies/{study.pk}/manage/change/", {"action": "close"}).status_code == 403
    )
    study.refresh_from_db()
    assert study.closed_at is None
    assert client_for(adjudicator).get("/annotate/studies/999999/manage/").status_code == 404


def test_managing_a_study(study, trio, adjudicator, tmp_path):
    client = client_for(adjudicator)
    url = f"/annotate/studies/{study.pk}/manage/change/"
    assert client.post(url, {"action": "explode"}).status_code == 400
    edit = client.post(url, {"action": "edit", "name": "Renamed", "adjudicator": adjudicator.pk})
    assert edit.status_code == 302
    study.refresh_from_db()
    assert study.name == "Renamed" and study.seed == 0  # seed and k are fixed once assigned
    new_ids = more_pairs(tmp_path, 2)
    added = client.post(url, {"action": "add_runs", "run_ids": " ".join(map(str, new_ids))})
    assert added.status_code == 302
    assert Assignment.objects.filter(study=study, run_id__in=new_ids).count() == 4
    newcomer = new_user("coder9", ANNOTATOR)
    joined = client.post(url, {"action": "add_annotator", "replacement": newcomer.pk})
    assert joined.status_code == 302 and study.annotators.filter(pk=newcomer.pk).exists()
    left = client.post(url, {"action": "replace_annotator", "leaving": trio[0].pk})
    assert left.status_code == 302 and not study.annotators.filter(pk=trio[0].pk).exists()
    assert not Assignment.objects.filter(study=study, annotator=trio[0]).exists()  # nothing was submitted
    nobody = client.post(url, {"action": "replace_annotator"})
    assert nobody.status_code == 422 and b"choose the annotator who leaves" in nobody.content
    assert client.post(url, {"action": "close"}).status_code == 302
    refused = client.post(url, {"action": "add_runs", "run_ids": str(new_ids[0])})
    assert refused.status_code == 422 and b"is closed" in refused.content
    assert client.post(url, {"action": "reopen"}).status_code == 302
    actions = set(ActivityEntry.objects.filter(study_id=study.pk).values_list("action", flat=True))
    assert {"study.update", "study.add_runs", "study.add_annotator", "study.replace_annotator", "study.close",
            "study.reopen"} <= actions  # fmt: skip
    page = client.get(f"/annotate/studies/{study.pk}/manage/")
    assert b"coder9" in page.content and b"(left)" not in page.content


def test_the_django_admin_changes_only_name_and_adjudicator(study, admin_user, trio):
    staff = client_for(admin_user)
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    assert staff.get("/admin/annotation/study/add/").status_code == 403  # created on the design page
    form = staff.get(f"/admin/annotation/study/{study.pk}/change/").content.decode()
    assert 'name="name"' in form and 'name="adjudicator"' in form
    for field in ("annotators", "coders_per_run", "seed", "closed_at", "codebook", "runs"):
        assert f'name="{field}"' not in form, field
    staff.post(f"/admin/annotation/study/{study.pk}/change/",
               {"name": "S renamed", "adjudicator": study.adjudicator_id, "annotators": [trio[0].pk],
                "coders_per_run": 3})  # fmt: skip
    study.refresh_from_db()
    assert study.name == "S renamed" and study.coders_per_run == 2 and study.annotators.count() == 3
    from activity.models import ActivityEntry

    entry = ActivityEntry.objects.get(action="study.edit")  # both sides of the edit are logged
    assert entry.detail["before"] == {"name": "S"} and entry.detail["changed"] == {"name": "S renamed"}
