"""Schemathesis against our own OpenAPI schema: every operation, generated inputs; no server
error and every response conforms to the schema. (Driven through Hypothesis directly: the
schemathesis pytest plugin does not run under pytest 9.)"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from config.wsgi import application

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _keep_test_connection():
    """Like Django's test client: calling the WSGI app directly must not close the connection
    that holds the test's transaction (PostgreSQL would lose it)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _conforms(operation, headers):
    @given(case=operation.as_strategy())
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case):
        # `ignored_auth` swaps in fake credentials for one scheme while our explicit, valid token
        # is still sent, so it cannot apply here; unauthenticated access is covered by test_routes.
        # Multipart "files" are generated as plain form fields (no filename), which is not an upload:
        # our 400 is right, so the upload operation skips the positive-data check.
        excluded = [ignored_auth] + ([positive_data_acceptance] if case.media_type == "multipart/form-data" else [])
        case.call_and_validate(headers=headers, excluded_checks=excluded)

    return run


def test_every_operation_conforms(study, admin_user, annotator):
    checked = []
    for user in (admin_user, annotator):
        token = Token.objects.get_or_create(user=user)[0].key
        headers = {"Authorization": f"Token {token}"}
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers)
        for result in schema.get_all_operations():
            operation = result.ok()

            run = _conforms(operation, headers)
            run()
            checked.append(f"{user.username} {operation.label}")
    assert len(checked) >= 2 * 12  # every operation of the schema, as an admin and as an annotator


@pytest.mark.django_db
def test_the_schema_says_what_the_api_takes(admin_user):
    """An upload is multipart with a binary file; a label's code is a non-empty key; a refused submit (422) is
    documented with the rest."""
    from tests.factories import client_for

    schema = client_for(admin_user).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    upload = schema["paths"]["/api/imports/"]["post"]["requestBody"]["content"]
    assert list(upload) == ["multipart/form-data"]
    ref = upload["multipart/form-data"]["schema"]["$ref"].split("/")[-1]
    assert schema["components"]["schemas"][ref]["properties"]["file"] == {"type": "string", "format": "binary"}
    label = schema["components"]["schemas"]["LabelInput"]["properties"]["code"]
    assert label["minLength"] == 1 and label["maxLength"] == 100
    submit = next(p for path, p in schema["paths"].items() if path.endswith("/submit/"))
    assert "422" in submit["post"]["responses"]
