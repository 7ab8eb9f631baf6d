"""Annotators see only the runs they code (and those runs' twins); adjudicators and admins see all. The
annotation app decides it; without its rule, the trajectories app lets only adjudicators and admins in."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.access import RUN_ACCESS
from annotation.models import Assignment
from tests.factories import client_for, simple_run, write_jsonl
from trajectories import access
from trajectories.models import AgentContext, Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


@pytest.fixture
def outside_run(tmp_path, study):
    import_paths(paths=[write_jsonl(tmp_path / "o" / "x.jsonl", simple_run("not-in-study", n_sub=1))])
    return Run.objects.get(task__external_id="not-in-study")


def test_annotator_sees_own_runs_and_their_twins_only(study, trio, outside_run):
    coder = trio[0]
    own = set(Assignment.objects.filter(study=study, annotator=coder).values_list("run_id", flat=True))
    others = set(study.runs.values_list("pk", flat=True)) - own
    client = client_for(coder)
    body = client.get("/trajectories/").content.decode()
    assert "not-in-study" not in body
    for run_id in own:
        assert client.get(f"/trajectories/runs/{run_id}/").status_code == 200
        twin = Run.objects.get(
            task=Run.objects.get(pk=run_id).task, agent=Run.objects.get(pk=run_id).agent, mode="sequential"
        )
        assert client.get(f"/trajectories/runs/{twin.pk}/").status_code == 200
    for run_id in others | {outside_run.pk}:
        assert client.get(f"/trajectories/runs/{run_id}/").status_code == 404
        ctx = AgentContext.objects.filter(run_id=run_id).first()
        assert client.get(f"/trajectories/runs/{run_id}/contexts/{ctx.pk}/events/").status_code == 404
    api = APIClient()
    api.force_authenticate(coder)
    listed = {row["id"] for row in api.get("/api/runs/", {"page_size": 100}).json()["results"]}
    assert own <= listed and not (others & listed) and outside_run.pk not in listed
    assert api.get(f"/api/runs/{outside_run.pk}/").status_code == 404
    assert api.get(f"/api/runs/{outside_run.pk}/events/").status_code == 404
    csv_text = b"".join(client.get("/trajectories/metrics.csv").streaming_content).decode()
    assert "not-in-study" not in csv_text


def test_adjudicator_and_admin_see_everything(study, outside_run, adjudicator, admin_user):
    for user in (adjudicator, admin_user):
        assert client_for(user).get(f"/trajectories/runs/{outside_run.pk}/").status_code == 200


def test_user_without_role_or_work_sees_nothing(outsider, outside_run):
    client = client_for(outsider)
    assert client.get(f"/trajectories/runs/{outside_run.pk}/").status_code == 404
    assert "0 runs" in client.get("/trajectories/").content.decode()


@pytest.fixture
def trajectories_alone():
    """The trajectories app as if no annotation app had given it its rule."""
    access.rule_install(access.BROWSERS_ONLY)
    yield
    access.rule_install(RUN_ACCESS)


def test_on_its_own_the_trajectories_app_lets_only_adjudicators_and_admins_see_runs_and_hits(
    trajectories_alone, study, trio, adjudicator, admin_user, outsider
):
    coder = trio[0]
    own = Assignment.objects.filter(study=study, annotator=coder).values_list("run_id", flat=True).first()
    for user in (adjudicator, admin_user):
        page = client_for(user).get(f"/trajectories/runs/{own}/")
        assert page.status_code == 200 and "signatures-head" in page.content.decode()
        assert f"/trajectories/runs/{own}/" in client_for(user).get("/trajectories/").content.decode()
    for user in (coder, outsider):  # coding the run counts for nothing without the annotation app
        client = client_for(user)
        assert client.get(f"/trajectories/runs/{own}/").status_code == 404
        assert "0 runs" in client.get("/trajectories/").content.decode()
        api = APIClient()
        api.force_authenticate(user)
        assert api.get("/api/runs/").json()["count"] == 0
