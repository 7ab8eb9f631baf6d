"""Concurrent requests on a real PostgreSQL: assignment constraints and lost updates.

Each thread has its own database connection; a barrier releases them together.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from annotation.errors import AnnotationError, ConflictError
from annotation.models import Annotation, Assignment
from annotation.selectors.queue import annotation_for
from annotation.services.coding import annotation_save
from annotation.services.studies import assignment_add, study_assign
from tests.conftest import skip_or_fail
from tests.factories import new_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only(db):
    if connection.vendor != "postgresql":
        skip_or_fail("race tests need PostgreSQL (DATABASE_URL=postgres://…)")


def race(*calls):
    """Run the callables at once; return their results (or exceptions)."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def worker(index, call):
        try:
            barrier.wait(timeout=10)
            results[index] = call()
        except Exception as exc:  # noqa: BLE001 - the exception *is* the result under test
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_concurrent_assign_calls_give_exactly_two_per_run(study):
    Assignment.objects.filter(study=study).delete()
    results = race(lambda: study_assign(study=study), lambda: study_assign(study=study))
    assert not any(isinstance(r, Exception) for r in results), results
    per_run = Counter(Assignment.objects.filter(study=study).values_list("run_id", flat=True))
    assert set(per_run.values()) == {2} and len(per_run) == study.runs.count()


def test_two_requests_for_the_last_slot_one_wins(study):
    run = study.runs.first()
    Assignment.objects.filter(study=study, run=run, slot=2).delete()
    x, y = new_user("extra-x"), new_user("extra-y")
    results = race(
        lambda: assignment_add(study=study, run=run, annotator=x),
        lambda: assignment_add(study=study, run=run, annotator=y),
    )
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], AnnotationError), results
    assert Assignment.objects.filter(study=study, run=run).count() == 2


def test_lost_update_is_impossible(study, trio):
    """Two tabs save at once — first the very first save of a draft, then a later one: exactly one
    wins each time, the other gets a conflict, and the stored draft is the winner's."""
    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).first()

    def save(notes, version):
        draft = annotation_for(assignment=Assignment.objects.get(pk=assignment.pk))
        return annotation_save(
            annotation=draft, actor=trio[0], version=version, no_failure=True, notes=notes, labels=[]
        )

    for version in (1, 2):
        results = race(lambda v=version: save("tab A", v), lambda v=version: save("tab B", v))
        conflicts = [r for r in results if isinstance(r, ConflictError)]
        winners = [r for r in results if isinstance(r, Annotation)]
        assert len(conflicts) == 1 and len(winners) == 1, results
        stored = Annotation.objects.get(assignment=assignment)
        assert stored.version == version + 1 and stored.notes == winners[0].notes


def test_racing_http_saves_never_lose_an_update(study, trio):
    """Two clients post the annotate form at once with the same version, over HTTP: one is saved,
    the other gets 409 without the new version, and its retry with its own version is refused too."""
    from tests.factories import client_for

    assignment = Assignment.objects.filter(study=study, annotator=trio[0]).first()
    url = f"/annotate/{assignment.pk}/save/"
    htmx = {"HTTP_HX_REQUEST": "true"}

    def post(notes, version):
        return client_for(trio[0]).post(url, {"version": version, "no_failure": "on", "notes": notes}, **htmx)

    for version in (1, 2):
        responses = race(lambda v=version: post("client A", v), lambda v=version: post("client B", v))
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 409], codes
        loser = next(r for r in responses if r.status_code == 409)
        assert 'name="version"' not in loser.content.decode()
        winner = next(r for r in responses if r.status_code == 200)
        stored = Annotation.objects.get(assignment=assignment)
        assert stored.version == version + 1 and f'value="{version + 1}"' in winner.content.decode()
        assert post("late retry", version).status_code == 409
        assert Annotation.objects.get(assignment=assignment).notes == stored.notes


def test_two_rulings_sent_at_once_record_one_final(study, codebook, adjudicator):
    """The adjudicator submits the ruling from two tabs at once: one is recorded, the other is told the
    case is adjudicated (409), never a server error or a second final coding."""
    from annotation.models import Discussion, FinalCoding
    from annotation.services.review import discussion_escalate
    from tests.factories import client_for, submit_disagreement

    run = study.runs.order_by("pk").first()
    discussion = submit_disagreement(study, run.pk, codebook)
    discussion_escalate(discussion=discussion, actor=Assignment.objects.filter(run=run).first().annotator)
    stale = codebook.codes.get(key="stale-handoff")
    url = f"/annotate/adjudication/{discussion.pk}/"

    def post(rationale):
        return client_for(adjudicator).post(url, {"code": [stale.pk], f"rationale-{stale.pk}": rationale})

    responses = race(lambda: post("tab A"), lambda: post("tab B"))
    assert sorted(r.status_code for r in responses) == [302, 409], responses
    assert "is adjudicated" in next(r for r in responses if r.status_code == 409).content.decode()
    assert FinalCoding.objects.filter(run=run).count() == 1
    assert Discussion.objects.get(pk=discussion.pk).status == "adjudicated"
