"""The benchmarks' bulk-built study has the shapes the real services write: what a page reads
from it is what it would read after the same codings done through the services."""

from __future__ import annotations

import pytest

from annotation.analysis.inputs import independent_codings
from annotation.models import Annotation, AuditEntry, Discussion, FinalCoding
from annotation.services.coding import snapshot
from annotation.services.review import mode_keys, run_reconcile
from bench.study_scale import build_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(codebook):
    return build_study(key="t", tasks=30, codebook=codebook)


def test_history_is_what_the_services_would_have_written(study):
    annotations = Annotation.objects.filter(assignment__study=study)
    assert annotations.count() == 2 * study.runs.count() == 2 * 30 * 3
    for annotation in annotations:
        entries = list(annotation.history.order_by("pk"))
        assert [e.action for e in entries][:2] == ["save", "submit"]
        assert entries[0].after == entries[1].before
        assert entries[-1].after == snapshot(annotation)  # the stored coding is the last entry's `after`
        assert entries[1].after["status"] == "submitted" and entries[1].after["version"] == 3


def test_each_run_reconciled_as_run_reconcile_would(study):
    taxonomy, codings, _ = independent_codings(study=study)
    assert len(codings) == 2 * study.runs.count()
    discussed = set(Discussion.objects.filter(study=study).values_list("run_id", flat=True))
    assert discussed and len(discussed) < study.runs.count()
    first = {}
    for entry in AuditEntry.objects.filter(annotation__assignment__study=study, action="submit"):
        first.setdefault(entry.annotation.assignment.run_id, []).append(
            {label["code"] for label in entry.after["labels"]}
        )
    for run_id, (a, b) in first.items():
        assert (a != b) == (run_id in discussed)
    for final in FinalCoding.objects.filter(study=study, provenance="agreed").select_related("run")[:20]:
        assert run_reconcile(study=study, run_id=final.run_id) == final  # idempotent: nothing more to do
        both = [mode_keys(a) for a in Annotation.objects.filter(assignment__study=study, assignment__run=final.run)]
        assert set(final.labels.values_list("code__key", flat=True)) == both[0] == both[1]
    waiting = Discussion.objects.filter(study=study, status="escalated")
    assert not FinalCoding.objects.filter(study=study, run_id__in=waiting.values("run_id")).exists()
    resolved = Discussion.objects.filter(study=study, status__in=["consensus", "adjudicated"])
    assert FinalCoding.objects.filter(study=study, run_id__in=resolved.values("run_id")).count() == resolved.count()
