"""The annotator's queue as pages: stored queue positions, keyset pages that cost the same at any
depth, tabs that filter in SQL, and clear refusals for a bad cursor or someone else's study."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.assignment import queue_order
from annotation.models import Assignment
from annotation.selectors import queue as queue_selectors
from annotation.selectors.queue import annotation_for
from annotation.services.coding import annotation_save, annotation_skip, annotation_submit
from annotation.services.studies import annotator_replace, assignment_add, study_assign, study_create
from tests.factories import client_for, new_user

pytestmark = pytest.mark.django_db


def positions(study, user) -> list[int]:
    return list(
        Assignment.objects.filter(study=study, annotator=user).order_by("position").values_list("position", flat=True)
    )


def test_each_queue_is_numbered_from_one_in_an_order_of_its_own_drawn_from_the_seed(study, trio):
    for user in trio:
        assert positions(study, user) == [1, 2, 3, 4]
    orders = {
        user.pk: [a.run_id for a in Assignment.objects.filter(study=study, annotator=user).order_by("position")]
        for user in trio
    }
    for user in trio:  # each annotator's order is drawn from the seed and the annotator (assignment.py)
        assert orders[user.pk] == queue_order(orders[user.pk], seed=study.seed, annotator=user.username, start=1)
    # Reproducible: the same seed gives the same queues.
    Assignment.objects.filter(study=study).delete()
    study_assign(study=study)
    again = {
        user.pk: [a.run_id for a in Assignment.objects.filter(study=study, annotator=user).order_by("position")]
        for user in trio
    }
    assert again == orders


def test_runs_added_later_join_the_end_of_each_queue(study, trio):
    extra = new_user("late-coder", "annotator")
    not_mine = study.runs.exclude(assignments__annotator=trio[0]).first()
    Assignment.objects.filter(study=study, run=not_mine, slot=2).delete()
    assert assignment_add(study=study, run=not_mine, annotator=extra).position == 1  # a new queue starts at 1
    leavers = [a.run_id for a in Assignment.objects.filter(study=study, annotator=trio[0]).order_by("position")]
    # The replacement receives the leaver's unsubmitted runs after what they already have, in the leaver's order.
    assert annotator_replace(study=study, leaving=trio[0], replacement=extra)["moved"] == 4
    assert positions(study, extra) == [1, 2, 3, 4, 5]
    moved = Assignment.objects.filter(study=study, annotator=extra, position__gt=1).order_by("position")
    assert [a.run_id for a in moved] == leavers


def test_assigning_twice_keeps_positions_unique_and_assigns_nothing_new(study, trio):
    assert study_assign(study=study) == 0
    for user in trio:
        assert positions(study, user) == [1, 2, 3, 4]


def _page(client, **params):
    response = client.get("/annotate/", params)
    assert response.status_code == 200, response.content[:300]
    return response.context["page"]


def test_the_queue_pages_forward_and_back_in_queue_order(study, trio, monkeypatch):
    monkeypatch.setattr(queue_selectors, "QUEUE_PAGE_SIZE", 3)
    me = trio[0]
    client = client_for(me)
    first = _page(client, show="all")
    assert [a.position for a in first.items] == [1, 2, 3] and first.first and first.before is None
    second = _page(client, show="all", after=first.after)
    assert [a.position for a in second.items] == [4] and second.after is None and not second.first
    back = _page(client, show="all", before=second.before)
    assert [a.position for a in back.items] == [1, 2, 3] and back.first
    body = client.get("/annotate/", {"show": "all"}).content.decode()
    assert f'href="?show=all&amp;after={first.after}"' in body and "next →" in body


def test_the_tabs_filter_what_is_left_submitted_and_skipped(study, trio):
    me = trio[0]
    client = client_for(me)
    mine = list(Assignment.objects.filter(study=study, annotator=me).order_by("position"))
    done = annotation_for(assignment=mine[0])
    annotation_save(annotation=done, actor=me, version=1, no_failure=True, notes="", labels=[])
    annotation_submit(annotation=done, actor=me, version=2)
    annotation_skip(annotation=annotation_for(assignment=mine[1]), actor=me, reason="logs cut")
    assert [a.pk for a in _page(client).items] == [a.pk for a in mine[1:]]  # default: to do (skipped included)
    assert [a.pk for a in _page(client, show="submitted").items] == [mine[0].pk]
    assert [a.pk for a in _page(client, show="skipped").items] == [mine[1].pk]
    assert len(_page(client, show="all").items) == 4
    body = client.get("/annotate/").content.decode()
    assert "1 of 4 submitted" in body and "1 skipped" in body


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"after": "abc"}, "&#x27;after&#x27; must be the number of a row"),
        ({"after": "1", "before": "2"}, "not both"),
        ({"after": "999999"}, "no longer exists"),
        ({"show": "everything"}, "&#x27;show&#x27; must be one of todo, submitted, skipped, all"),
    ],
)
def test_a_bad_page_parameter_is_a_400_that_says_which(study, trio, params, says):
    response = client_for(trio[0]).get("/annotate/", params)
    assert response.status_code == 400
    assert says in response.content.decode()


def test_another_studys_queue_is_refused_without_showing_it(study, trio, codebook, adjudicator):
    others = [new_user(f"other{i}", "annotator") for i in range(3)]
    elsewhere = study_create(name="Elsewhere", codebook=codebook, annotators=others, adjudicator=adjudicator,
                             run_ids=list(study.runs.values_list("pk", flat=True)))  # fmt: skip
    study_assign(study=elsewhere)
    response = client_for(trio[0]).get("/annotate/", {"study": elsewhere.pk})
    assert response.status_code == 400 and b"Elsewhere" not in response.content


def test_the_queue_page_costs_the_same_queries_for_a_short_and_a_long_queue(study, trio, monkeypatch):
    monkeypatch.setattr(queue_selectors, "QUEUE_PAGE_SIZE", 2)
    me = trio[0]
    client = client_for(me)
    client.get("/annotate/")  # session, caches
    with CaptureQueriesContext(connection) as short:
        client.get("/annotate/", {"show": "all"})
    later = _page(client, show="all")
    with CaptureQueriesContext(connection) as deep:
        client.get("/annotate/", {"show": "all", "after": later.after})
    assert len(deep) == len(short) + 1  # + the cursor row's sort values


def _discussions(study, codebook, n: int):
    from tests.factories import submit_disagreement

    return [submit_disagreement(study, run.pk, codebook) for run in study.runs.order_by("pk")[:n]]


def test_discussions_are_listed_by_state_a_page_at_a_time(study, codebook, trio, monkeypatch):
    from annotation.selectors import review
    from annotation.services.review import discussion_escalate

    monkeypatch.setattr(review, "LIST_PAGE_SIZE", 1)
    discussions = _discussions(study, codebook, 6)
    me = discussions[0].study.assignments.get(run=discussions[0].run, slot=1).annotator
    mine = [d for d in discussions if study.assignments.filter(run=d.run, annotator=me).exists()]
    discussion_escalate(discussion=mine[0], actor=me)
    client = client_for(me)
    response = client.get("/annotate/discussions/")
    body = response.content.decode()
    assert f'Open <span class="muted">({len(mine) - 1})</span>' in body
    assert 'With the adjudicator <span class="muted">(1)</span>' in body
    seen, params = [], {}
    while True:  # follow "next" to the end: every open discussion once, none escalated
        page = client.get("/annotate/discussions/", params).context["page"]
        seen += [d.pk for d in page.items]
        if page.after is None:
            break
        params = {"after": page.after}
    assert sorted(seen) == sorted(d.pk for d in mine[1:])
    escalated = client.get("/annotate/discussions/", {"tab": "escalated"}).context["page"].items
    assert [d.pk for d in escalated] == [mine[0].pk]
    assert client.get("/annotate/discussions/", {"tab": "nope"}).status_code == 400
    outsider = new_user("nobody-here", "annotator")
    assert client_for(outsider).get("/annotate/discussions/").context["page"].items == []


def test_the_adjudication_queue_pages_and_counts_what_waits(study, codebook, trio, adjudicator, monkeypatch):
    from annotation.selectors import review
    from annotation.services.review import discussion_escalate

    monkeypatch.setattr(review, "LIST_PAGE_SIZE", 2)
    for discussion in _discussions(study, codebook, 5):
        coder = study.assignments.get(run=discussion.run, slot=1).annotator
        discussion_escalate(discussion=discussion, actor=coder)
    client = client_for(adjudicator)
    first = client.get("/annotate/adjudication/")
    assert "5 escalated disagreements" in first.content.decode()
    pages = [first.context["page"]]
    while pages[-1].after is not None:
        pages.append(client.get("/annotate/adjudication/", {"after": pages[-1].after}).context["page"])
    assert [len(p.items) for p in pages] == [2, 2, 1]
    assert client.get("/annotate/adjudication/", {"before": "x"}).status_code == 400
    assert client_for(trio[0]).get("/annotate/adjudication/").status_code == 403  # not an adjudicator
