"""The audit trail is append-only in the database: on PostgreSQL a trigger refuses UPDATE and DELETE
on it whoever asks; everywhere, an annotation with history cannot be deleted (PROTECT)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import ProtectedError

from annotation.models import Annotation, Assignment, AuditEntry, Study
from annotation.selectors.queue import annotation_for
from annotation.services.coding import annotation_save
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.django_db


def coded(study, user) -> Annotation:
    annotation = annotation_for(assignment=Assignment.objects.filter(study=study, annotator=user).first())
    annotation_save(annotation=annotation, actor=user, version=1, no_failure=True, notes="first", labels=[])
    return annotation


def test_history_outlives_every_delete_the_app_could_make(study, trio):
    annotation = coded(study, trio[0])
    for doomed in (annotation, study, trio[0]):
        with pytest.raises(ProtectedError), transaction.atomic():
            doomed.delete()
    assert AuditEntry.objects.filter(annotation=annotation).count() == 1
    assert Study.objects.filter(pk=study.pk).exists()


def test_postgresql_refuses_to_rewrite_or_delete_history(study, trio):
    if connection.vendor != "postgresql":
        skip_or_fail("the append-only trigger is PostgreSQL's (DATABASE_URL=postgres://…)")
    annotation = coded(study, trio[0])
    entry = AuditEntry.objects.get(annotation=annotation)
    attempts = [
        lambda: AuditEntry.objects.filter(pk=entry.pk).update(action="forged"),
        lambda: AuditEntry.objects.filter(pk=entry.pk).delete(),
        lambda: connection.cursor().execute("DELETE FROM annotation_auditentry"),
        lambda: connection.cursor().execute("UPDATE annotation_auditentry SET after = NULL"),
    ]
    for attempt in attempts:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            attempt()
    entry.refresh_from_db()
    assert entry.action == "save" and entry.after["notes"] == "first"
