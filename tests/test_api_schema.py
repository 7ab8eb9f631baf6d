"""The OpenAPI schema is what the API returns: schemathesis generates requests for every operation
from /api/schema/ and checks each response against it (status codes, content types, bodies,
headers), in process, as an authenticated annotator with work to see."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
api = schemathesis.openapi.from_dict(SPEC)
# Two checks are left out, for documented reasons (docs/annotation.md, API):
# * `ignored_auth` swaps in an invalid *session cookie* (the schema's first scheme) while the valid
#   token these calls carry still authenticates them; 401/403 without credentials is covered by
#   tests/test_authorization.py.
# * `positive_data_acceptance` expects every schema-valid body to be accepted, but the API's 422s are
#   rules about the study's data that no schema can state: a code key of the pinned codebook, a draft
#   with something to submit, a rationale for every mode.
EXCLUDED = [ignored_auth, positive_data_acceptance]


@pytest.fixture
def token(study, trio):
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=trio[0]).key


@api.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_response_matches_the_schema(case, token):
    case.call_and_validate(
        app=get_wsgi_application(), headers={"Authorization": f"Token {token}"}, excluded_checks=EXCLUDED
    )
