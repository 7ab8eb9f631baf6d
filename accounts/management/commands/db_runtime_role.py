"""Give the role the web and the worker connect as exactly what they need — and make sure it owns nothing.

Run as the owner (the role migrations run as), after `migrate`: docker-compose.yml's web service and `.ci/run` do.
The runtime role reads and writes the app's tables (SELECT, INSERT, UPDATE, DELETE; its sequences), but only reads
and appends to the coding history and the activity log; it owns no table, so it cannot ALTER, DISABLE TRIGGER,
DROP TRIGGER or TRUNCATE, and being no superuser it cannot set `session_replication_role`. Tables later
migrations create get the same grants (default privileges of the owner). docs/deploy.md, "Database roles"."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from psycopg import sql

APPEND_ONLY = ("annotation_auditentry", "activity_activityentry")
DEFAULT = "ALTER DEFAULT PRIVILEGES IN SCHEMA public "  # for the tables later migrations create


class Command(BaseCommand):
    help = "Grant the runtime database role (web, worker) what it needs on this database, as its owner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("role", help="the role the web and the worker connect as, e.g. parallax_app")

    def handle(self, *args, role: str, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("database roles are PostgreSQL's: DATABASE_URL=postgres://… (as the owner)")
        name = sql.Identifier(role)
        with connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
            found = cursor.fetchone()
            if found is None:
                raise CommandError(f"no role {role!r}: create it first (CREATE ROLE {role} LOGIN PASSWORD '…')")
            if found[0]:
                raise CommandError(f"{role!r} is a superuser: the runtime role must not be")
            cursor.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = %s ORDER BY 1", [role]
            )
            owned = [row[0] for row in cursor.fetchall()]
            if owned:
                raise CommandError(f"{role!r} owns {', '.join(owned)}: migrate as the owner role, not as {role!r}")
            if role == connection.settings_dict["USER"]:
                raise CommandError(f"run this as the owner role, not as {role!r}")
            statements = [
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(connection.settings_dict["NAME"]), name
                ),
                sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(name),
                sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}").format(name),
                sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(name),
                sql.SQL(DEFAULT + "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {}").format(name),
                sql.SQL(DEFAULT + "GRANT USAGE, SELECT ON SEQUENCES TO {}").format(name),
                *(
                    sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {} FROM {}").format(
                        sql.Identifier(table), name
                    )
                    for table in APPEND_ONLY
                ),
            ]
            for statement in statements:
                cursor.execute(statement)
        self.stdout.write(
            f"{role}: reads and writes the app's tables, appends to {' and '.join(APPEND_ONLY)}, owns none"
        )
