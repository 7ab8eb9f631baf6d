"""The audit trail is append-only in the database: on PostgreSQL triggers refuse UPDATE, DELETE and TRUNCATE
on it whoever asks, and the role the web and the worker connect as owns no table and holds no privilege that
could erase or silence it; everywhere, an annotation with history cannot be deleted (PROTECT)."""

from __future__ import annotations

import io
import os

import psycopg
import pytest
from django.core.management import call_command
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


APPEND_ONLY_TABLES = ("annotation_auditentry", "activity_activityentry")
RUNTIME_ROLE = os.environ.get("PARALLAX_TEST_RUNTIME_ROLE", "parallax_app")  # .ci/run creates it
RUNTIME_PASSWORD = os.environ.get("PARALLAX_TEST_RUNTIME_PASSWORD", "parallax_app")


def test_the_owner_cannot_truncate_the_history_either(study, trio):
    if connection.vendor != "postgresql":
        skip_or_fail("the append-only triggers are PostgreSQL's (DATABASE_URL=postgres://…)")
    coded(study, trio[0])
    for table in APPEND_ONLY_TABLES:
        with (
            pytest.raises(DatabaseError, match="append-only: TRUNCATE"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending checks of this test's rows in the way
            cursor.execute("SET LOCAL parallax.allow_truncate = off")  # the test suite's own flush sets it
            cursor.execute(f"TRUNCATE {table} CASCADE")
    assert AuditEntry.objects.count() == 1


@pytest.mark.django_db(transaction=True)  # the grants must be committed for another connection to see them
def test_the_runtime_role_can_erase_nothing_and_owns_nothing(study, trio):
    """The role the web and the worker connect as (`manage.py db_runtime_role`, docs/deploy.md): every way to
    erase or silence the audit trail refused, and still reading and writing what the app needs."""
    if connection.vendor != "postgresql":
        skip_or_fail("database roles are PostgreSQL's (DATABASE_URL=postgres://…)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [RUNTIME_ROLE])
        if cursor.fetchone() is None:
            skip_or_fail(f"no role {RUNTIME_ROLE!r} (.ci/run creates it)")
    coded(study, trio[0])
    call_command("db_runtime_role", RUNTIME_ROLE, stdout=io.StringIO())
    settings = connection.settings_dict
    runtime = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432, dbname=settings["NAME"],
        user=RUNTIME_ROLE, password=RUNTIME_PASSWORD, autocommit=True,
    )  # fmt: skip
    with runtime:
        for table in APPEND_ONLY_TABLES:
            attacks = [
                f"TRUNCATE {table}",
                f"ALTER TABLE {table} DISABLE TRIGGER ALL",
                f"DROP TRIGGER {table}_append_only ON {table}",
                f"DELETE FROM {table}",
                f"UPDATE {table} SET id = id",
                f"SET session_replication_role = replica; DELETE FROM {table}",
            ]
            for attack in attacks:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    runtime.execute(attack)
            assert runtime.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= 1
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute("CREATE TABLE parallax_intruder (id int)")
        owned = runtime.execute("SELECT count(*) FROM pg_tables WHERE tableowner = current_user").fetchone()[0]
        assert owned == 0
        # what the app needs: read and write every table but the two it only appends to
        tables = [t for t in connection.introspection.table_names() if t not in APPEND_ONLY_TABLES]
        missing = [
            table
            for table in tables
            if not runtime.execute(
                "SELECT has_table_privilege(current_user, %s, 'SELECT, INSERT, UPDATE, DELETE')", [table]
            ).fetchone()[0]
        ]
        assert not missing, f"{RUNTIME_ROLE} cannot read and write {missing}"
        for table in APPEND_ONLY_TABLES:
            row = runtime.execute(
                "SELECT has_table_privilege(current_user, %s, 'SELECT'), has_table_privilege(current_user, %s, "
                "'INSERT'), has_table_privilege(current_user, %s, 'UPDATE')",
                [table, table, table],
            ).fetchone()
            assert row == (True, True, False)
    assert AuditEntry.objects.count() == 1
