"""Model fields of the annotation app."""

from __future__ import annotations

from django.db import models


class DocumentJSONField(models.JSONField):
    """A JSONField that keeps a document as it was written — its objects' keys in their order — on
    every database, so that a published file can be serialized back from its data byte for byte.

    Django's JSONField is `jsonb` on PostgreSQL, which sorts object keys (by length, then bytes);
    this one is PostgreSQL's `json` type (the text, checked to be JSON), written and read as `json`.
    SQLite stores the text either way. The price: PostgreSQL has no equality or containment operators
    for `json`, so filter on other columns; a key can still be read (`values("data__header__verdict")`)."""

    def db_type(self, connection):
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value, connection, prepared=False):
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        from django.db.backends.postgresql.operations import get_json_dumps
        from psycopg.types.json import Json  # the parameter typed `json`: sent as `jsonb`, its keys would be sorted

        if not prepared:
            value = self.get_prep_value(value)
        return Json(value, dumps=get_json_dumps(self.encoder))

    def from_db_value(self, value, expression, connection):
        if value is not None and not isinstance(value, str):
            return value  # psycopg has decoded the `json` column itself (keys in their order)
        return super().from_db_value(value, expression, connection)
