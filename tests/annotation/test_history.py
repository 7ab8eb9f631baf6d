"""The research record: every step that changes a study's data is in the append-only activity log,
and a run's history page shows it with the coding history and the comments — to the study's
adjudicator and admins only."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from activity.models import ActivityEntry
from annotation.models import Discussion
from annotation.services import review as flow
from tests.conftest import skip_or_fail
from tests.factories import both, client_for, code_run, mode_code

pytestmark = pytest.mark.django_db


def test_a_runs_history_shows_every_step_in_order(study, codebook, trio, adjudicator, admin_user):
    run = study.runs.order_by("pk").first()
    a, b = both(study, run)
    code_run(a, [mode_code(codebook, "lossy-handoff")])
    code_run(b, [mode_code(codebook, "stale-handoff")])
    discussion = Discussion.objects.get(study=study, run=run)
    flow.discussion_comment(discussion=discussion, author=a.annotator, text="The summary dropped the test name.")
    flow.discussion_escalate(discussion=discussion, actor=b.annotator)
    rule = flow.Ruling(mode_code(codebook, "stale-handoff").pk, "The handoff was stale.")
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[rule])
    actions = list(ActivityEntry.objects.filter(study_id=study.pk).values_list("action", flat=True))
    assert actions[:2] == ["study.create", "study.assign"]
    assert actions[-3:] == ["discussion.open", "discussion.escalate", "final.adjudicated"]

    url = f"/annotate/studies/{study.pk}/runs/{run.pk}/history/"
    page = client_for(adjudicator).get(url).content.decode()
    order = ["save: lossy-handoff", "submit: lossy-handoff", "discussion.open", "The summary dropped the test name.",
             "discussion.escalate", "adjudicated: stale-handoff"]  # fmt: skip
    positions = [page.index(text) for text in order]
    assert positions == sorted(positions), positions
    assert client_for(admin_user).get(url).status_code == 200
    for user in trio:  # the annotators — even the run's own coders — see no summary of everyone's work
        assert client_for(user).get(url).status_code == 403


def test_the_activity_log_is_append_only(study):
    entry = ActivityEntry.objects.filter(study_id=study.pk).first()
    with pytest.raises(ValueError):
        entry.save()
    with pytest.raises(ValueError):
        entry.delete()
    if connection.vendor != "postgresql":
        skip_or_fail("the append-only trigger is PostgreSQL's (DATABASE_URL=postgres://…)")
    for attempt in (
        lambda: ActivityEntry.objects.filter(pk=entry.pk).update(summary="forged"),
        lambda: ActivityEntry.objects.all().delete(),
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            attempt()


def test_the_history_shows_the_published_record_in_the_page(study, adjudicator):
    from annotation.models import PublishedRecord

    run = study.runs.order_by("pk").first()
    PublishedRecord.objects.create(study=study, run=run, name="annotation.md", text="pair_id: x/codex\n")
    page = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/runs/{run.pk}/history/").content.decode()
    title = page.split("<title>")[1].split("</title>")[0]
    assert "pair_id" not in title and "pair_id: x/codex" in page.split("</title>")[1]


def test_the_recorded_state_is_shown_as_the_json_it_is_stored_as(study, codebook, adjudicator):
    run = study.runs.order_by("pk").first()
    a, _ = both(study, run)
    code_run(a, [mode_code(codebook, "lossy-handoff")])
    page = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/runs/{run.pk}/history/").content.decode()
    assert "recorded state" in page and "&quot;no_failure&quot;: false" in page
    assert "None" not in page and "False" not in page  # not Python's repr of it
