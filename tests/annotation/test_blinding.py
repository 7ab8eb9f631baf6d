"""One blinding rule across studies (annotation.access.blind_to_pair): another coder's work on a run — their
coding in a discussion, the discussion list, the run's history, the adjudication queue and ruling page — stays
hidden from someone who still codes that run (or its twin) in any study, until they have submitted it there.

The world: a run coded by coder1 and coder3 in study A, where they disagree (a discussion opens, coder3's
rationale is SECRET); study B holds the same run, coded by coder1 and by A's adjudicator, neither submitted."""

from __future__ import annotations

import pytest

from annotation.models import Discussion
from annotation.services.review import discussion_escalate
from annotation.services.studies import study_assign, study_create
from tests.factories import client_for, code_run, mine, mode_code, new_user, route_world
from tests.routes import routes, urls

pytestmark = pytest.mark.django_db
SECRET = "C-SUBMITTED-RATIONALE-91bd"


@pytest.fixture
def shared(study, codebook, trio, adjudicator):
    ids = route_world(study, codebook, trio)
    me, _, c = trio
    mine_rows = mine(study, me).filter(run__assignments__annotator=c).exclude(annotation__isnull=False)
    mine_rows = mine_rows.exclude(run_id__in=Discussion.objects.values("run_id"))
    assignment = mine_rows.order_by("run_id").first()
    theirs = study.assignments.get(run_id=assignment.run_id, annotator=c)
    code_run(assignment, [mode_code(codebook, "lossy-handoff")], rationale="my own reading")
    code_run(theirs, [mode_code(codebook, "stale-handoff")], rationale=SECRET)
    discussion = Discussion.objects.get(study=study, run_id=assignment.run_id)
    other_lead = new_user("lead-b", "adjudicator")
    b = study_create(name="B", codebook=codebook, annotators=[me, adjudicator], adjudicator=other_lead,
                     run_ids=[assignment.run_id])  # fmt: skip
    study_assign(study=b)
    own = {**ids["own"], "run_id": assignment.run_id, "assignment_id": assignment.pk, "discussion_id": discussion.pk}
    return {"discussion": discussion, "ids": own, "b": b, "run_id": assignment.run_id}


# The study's exports (and its bundle) are the lead's whole-study data files, not a view of one run's work: the
# rule does not cut rows out of them (docs/annotation.md, "Blinding").
EXPORTS = ("export/", "exports/", "bundle")


def _crawl(client, ids) -> dict[str, int]:
    """GET every route with the shared run's ids, as a page and as htmx; the statuses, and SECRET never shown."""
    statuses = {}
    for route in routes():
        if any(word in route for word in EXPORTS):
            continue
        url = urls(route, ids, ids)["own"]
        for extra in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = client.get(url, **extra)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert SECRET.encode() not in body, f"GET {url} shows coder3's coding to someone still coding the run"
            statuses[url] = response.status_code
    return statuses


def test_a_coder_still_coding_the_run_in_another_study_sees_nothing_of_the_other_coders_work(shared, trio):
    me = trio[0]
    client = client_for(me)
    url = f"/annotate/discussions/{shared['discussion'].pk}/"
    statuses = _crawl(client, shared["ids"])
    assert statuses[url] == 404
    assert statuses[url + "comment/"] == 405  # and a POST is refused as not theirs:
    assert client.post(url + "comment/", {"text": "hello"}).status_code == 404
    listed = client.get("/annotate/discussions/").content.decode()
    assert url not in listed

    # submitted in study B too: the rule lifts, and coder3's coding is there
    b_assignment = shared["b"].assignments.get(annotator=me)
    code_run(b_assignment, [])
    assert SECRET in client.get(url).content.decode()
    assert url in client.get("/annotate/discussions/").content.decode()


def test_an_adjudicator_coding_the_run_in_another_study_neither_rules_on_it_nor_reads_its_history(
    shared, trio, adjudicator, study
):
    discussion = shared["discussion"]
    discussion_escalate(discussion=discussion, actor=trio[0])
    client = client_for(adjudicator)
    statuses = _crawl(client, shared["ids"])
    assert statuses[f"/annotate/adjudication/{discussion.pk}/"] == 404
    assert statuses[f"/annotate/studies/{study.pk}/runs/{shared['run_id']}/history/"] == 404
    assert f"/annotate/adjudication/{discussion.pk}/" not in client.get("/annotate/adjudication/").content.decode()

    code_run(shared["b"].assignments.get(annotator=adjudicator), [])
    assert SECRET in client.get(f"/annotate/adjudication/{discussion.pk}/").content.decode()
    assert f"/annotate/adjudication/{discussion.pk}/" in client.get("/annotate/adjudication/").content.decode()
    history = client.get(f"/annotate/studies/{study.pk}/runs/{shared['run_id']}/history/")
    assert SECRET in history.content.decode()
