from django.db import migrations

# Append-only against TRUNCATE too (a statement trigger: TRUNCATE fires no row trigger), on the coding history
# (annotation_auditentry) and the activity log. The runtime role holds no TRUNCATE privilege on either table and
# owns neither (docs/deploy.md, "Database roles"); this refuses it to the owner as well. The one exemption is the
# test suite's flush between transactional tests, which sets `parallax.allow_truncate` on its own connections.
NO_TRUNCATE = """
CREATE OR REPLACE FUNCTION parallax_no_truncate() RETURNS trigger AS $$
BEGIN
    IF coalesce(current_setting('parallax.allow_truncate', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the audit trail is append-only: TRUNCATE on % refused', TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;
"""
TABLES = ("annotation_auditentry", "activity_activityentry")


def no_truncate(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(NO_TRUNCATE, params=None)  # the SQL holds % (no placeholders)
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};")
        schema_editor.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION parallax_no_truncate();"
        )


def drop_no_truncate(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};")


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0022_text_limits"),
        ("activity", "0001_activity_log"),
    ]

    operations = [migrations.RunPython(no_truncate, drop_no_truncate)]
