"""The adjudication queue: its dropdown filters list each value once, filter, stay the adjudicator's own;
agreement is shown as agreement (1 − MASI distance), on the queue and the discussion pages."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment
from annotation.services.review import discussion_escalate
from annotation.services.studies import study_create
from tests.factories import client_for, submit_disagreement

pytestmark = pytest.mark.django_db
QUEUE = "/annotate/adjudication/"


def escalate(study, codebook, runs):
    discussions = []
    for run in runs:
        discussion = submit_disagreement(study, run.pk, codebook)
        actor = Assignment.objects.filter(study=study, run=run).first().annotator
        discussions.append(discussion_escalate(discussion=discussion, actor=actor))
    return discussions


def options(body: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}">(.*?)</select>', body, re.S).group(1)
    return re.findall(r"<option[^>]*>([^<]*)</option>", select)


def rows(body: str) -> int:
    return len(re.findall(r'href="/annotate/adjudication/\d+/"', body))


@pytest.fixture
def escalated(study, codebook):
    """Five escalated runs: three LoopsBench (Kimi Code, Codex, Kimi Code), two NL2RepoBench."""
    return escalate(study, codebook, list(study.runs.order_by("pk"))[:5])


def test_each_filter_value_is_listed_once(escalated, adjudicator):
    body = client_for(adjudicator).get(QUEUE).content.decode()
    assert rows(body) == 5
    assert options(body, "agent") == ["all", "Codex", "Kimi Code"]
    assert options(body, "benchmark") == ["all", "LoopsBench", "NL2RepoBench"]
    assert options(body, "study") == ["all", "S"]


def test_the_filters_filter_and_keep_the_choice(escalated, adjudicator):
    client = client_for(adjudicator)
    body = client.get(QUEUE, {"benchmark": "LoopsBench", "agent": "Kimi Code"}).content.decode()
    assert rows(body) == 2 and "<option selected>LoopsBench</option>" in body
    assert "<option selected>Kimi Code</option>" in body
    # a link may spell the benchmark another way
    assert rows(client.get(QUEUE, {"benchmark": "nl2repo"}).content.decode()) == 2


def test_an_unknown_filter_value_shows_an_empty_queue(escalated, adjudicator):
    body = client_for(adjudicator).get(QUEUE, {"study": "no such study"}).content.decode()
    assert rows(body) == 0 and "Nothing to adjudicate." in body


def test_another_adjudicator_sees_neither_the_runs_nor_their_values(escalated, codebook, trio, admin_user):
    study_create(name="Other", codebook=codebook, annotators=trio, adjudicator=admin_user)
    body = client_for(admin_user).get(QUEUE).content.decode()
    assert rows(body) == 0 and options(body, "agent") == ["all"] and options(body, "study") == ["all"]


def test_the_queue_costs_the_same_queries_for_one_run_or_five(study, codebook, adjudicator):
    client = client_for(adjudicator)
    runs = list(study.runs.order_by("pk"))
    escalate(study, codebook, runs[:1])
    with CaptureQueriesContext(connection) as one:
        client.get(QUEUE)
    escalate(study, codebook, runs[1:5])
    with CaptureQueriesContext(connection) as five:
        body = client.get(QUEUE).content.decode()
    assert rows(body) == 5 and len(five) == len(one)


def test_agreement_is_shown_as_agreement(escalated, adjudicator, trio):
    scale = "1 − MASI distance between the two first submissions' modes: 1 = the same modes, 0 = no mode in common"
    queue = client_for(adjudicator).get(QUEUE).content.decode()
    assert f"Agreement: {scale}." in queue and "(1 − MASI)" not in queue
    discussion = escalated[0]
    annotator = Assignment.objects.filter(study=discussion.study, run=discussion.run).first().annotator
    listing = client_for(annotator).get("/annotate/discussions/").content.decode()
    assert f"Agreement: {scale}." in listing
    detail = client_for(annotator).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    assert f"Agreement <strong>{discussion.agreement:.2f}</strong>" in detail and f"({scale})" in detail
    assert "(1 − MASI)" not in detail
