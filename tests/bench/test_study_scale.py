"""The benchmarks' bulk-built study has the shapes the real services write: what a page reads
from it is what it would read after the same codings done through the services."""

from __future__ import annotations

from collections import Counter

import pytest

from annotation.analysis.inputs import independent_codings
from annotation.models import Annotation, AuditEntry, Discussion, FinalCoding, Label
from annotation.services.coding import snapshot
from annotation.services.review import mode_keys, run_reconcile
from bench.study_scale import build_study
from trajectories.models import SignatureHit

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def built(module_transaction, django_db_blocker) -> int:
    """The bulk-built study, once for the module (the tests only read it)."""
    from django.db import connection

    from taxonomy.services import codebook_load_default

    with django_db_blocker.unblock():
        study = build_study(key="t", tasks=30, codebook=codebook_load_default())
        if connection.vendor == "postgresql":
            # Planner statistics, as autovacuum leaves a database after bulk writes (and as bench/study_bench.py
            # measures): rows written inside the test's transaction are invisible to autovacuum, and with tables
            # taken for empty one plan of this module's reads took 314 s instead of a second.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        return study.pk


@pytest.fixture
def study(built, db):
    from annotation.models import Study

    return Study.objects.get(pk=built)


def test_history_is_what_the_services_would_have_written(study):
    annotations = Annotation.objects.filter(assignment__study=study)
    # a coding day: most runs coded twice, some with a draft or one coding, some not started
    assert 1.5 * study.runs.count() < annotations.count() < 2 * study.runs.count()
    assert annotations.filter(status="draft").exists()
    assert study.runs.exclude(assignments__annotation__isnull=False).exists()
    for annotation in annotations:
        entries = list(annotation.history.order_by("pk"))
        assert entries[0].action == "save" and entries[-1].after == snapshot(annotation)
        if annotation.status == "submitted":
            assert [e.action for e in entries][:2] == ["save", "submit"] and entries[0].after == entries[1].before
            assert entries[1].after["status"] == "submitted" and entries[1].after["version"] == 3
        else:
            assert [e.action for e in entries] == ["save"] and annotation.submitted_at is None


def test_the_runs_and_codings_look_like_the_paper_corpus(study):
    from annotation.services.anchors import anchor_problems

    run = study.runs.filter(subagents_created__gte=2).first()
    assert run.events.count() == run.n_events >= 50 and run.contexts.count() == 1 + run.subagents_created
    label = Label.objects.filter(annotation__assignment__study=study).first()
    assert label.rationale.count("\n\n") == 2 and len(label.evidence) >= 2 and len(label.contrast) == 1
    assert SignatureHit.objects.filter(run__in=study.runs.all()).exists()
    assert Discussion.objects.filter(study=study, status="open").exists()
    # every anchor opens its line of the stored logs (evidence: the coded run; contrast: its twin)
    labels = Label.objects.filter(annotation__assignment__study=study).select_related("annotation__assignment__run")
    for label in labels[:200]:
        assert anchor_problems(run=label.annotation.assignment.run, labels=[label], unchecked=True) == {}


def test_each_run_reconciled_as_run_reconcile_would(study):
    taxonomy, codings, _ = independent_codings(study=study)
    submitted = Annotation.objects.filter(assignment__study=study, status="submitted").count()
    assert len(codings) == submitted
    discussed = set(Discussion.objects.filter(study=study).values_list("run_id", flat=True))
    assert discussed and len(discussed) < study.runs.count()
    first = {}
    for entry in AuditEntry.objects.filter(annotation__assignment__study=study, action="submit"):
        first.setdefault(entry.annotation.assignment.run_id, []).append(
            Counter(label["code"] for label in entry.after["labels"])
        )
    for run_id, codings_of_run in first.items():
        if len(codings_of_run) == 2:  # both in: discussed exactly when their modes or episode counts differ
            assert (codings_of_run[0] != codings_of_run[1]) == (run_id in discussed)
        else:
            assert run_id not in discussed
    for final in FinalCoding.objects.filter(study=study, provenance="agreed").select_related("run")[:20]:
        assert run_reconcile(study=study, run_id=final.run_id) == final  # idempotent: nothing more to do
        both = [mode_keys(a) for a in Annotation.objects.filter(assignment__study=study, assignment__run=final.run)]
        assert set(final.labels.values_list("code__key", flat=True)) == both[0] == both[1]
    waiting = Discussion.objects.filter(study=study, status__in=["escalated", "open"])
    assert not FinalCoding.objects.filter(study=study, run_id__in=waiting.values("run_id")).exists()
    resolved = Discussion.objects.filter(study=study, status__in=["consensus", "adjudicated"])
    assert FinalCoding.objects.filter(study=study, run_id__in=resolved.values("run_id")).count() == resolved.count()
