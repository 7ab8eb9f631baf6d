from __future__ import annotations

from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


def test_login_is_throttled_after_repeated_failures(annotator, settings):
    settings.PARALLAX_LOGIN_FAILURES_PER_USER = 3
    client = Client()
    for _ in range(3):
        assert client.post("/accounts/login/", {"username": "ann1", "password": "wrong"}).status_code == 200
    locked = client.post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"})
    assert locked.status_code == 429 and "Too many failed attempts" in locked.content.decode()
    assert "_auth_user_id" not in client.session  # not logged in, even with the right password


def test_success_resets_the_counter(annotator, settings):
    settings.PARALLAX_LOGIN_FAILURES_PER_USER = 3
    client = Client()
    for _ in range(2):
        client.post("/accounts/login/", {"username": "ann1", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"}).status_code == 302
    for _ in range(2):
        assert Client().post("/accounts/login/", {"username": "ann1", "password": "wrong"}).status_code == 200


def test_per_address_limit(annotator, settings):
    settings.PARALLAX_LOGIN_FAILURES_PER_ADDRESS = 4
    client = Client()
    for name in ("a", "b", "c", "d"):
        client.post("/accounts/login/", {"username": name, "password": "x"})
    assert client.post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"}).status_code == 429


def test_api_token_auth_and_no_basic_auth(annotator):
    out = StringIO()
    call_command("create_api_token", "ann1", stdout=out)
    key = out.getvalue().strip()
    client = APIClient()
    assert client.get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    import base64

    basic = base64.b64encode(b"ann1:pw-ann1").decode()
    assert client.get("/api/assignments/", HTTP_AUTHORIZATION=f"Basic {basic}").status_code in (401, 403)


def test_forwarded_address_only_when_trusted(annotator, settings):
    settings.PARALLAX_LOGIN_FAILURES_PER_ADDRESS = 2
    for trusted, expected in ((False, 429), (True, 302)):
        cache.clear()
        settings.PARALLAX_TRUST_X_FORWARDED_FOR = trusted
        client = Client()
        for index in range(2):  # two failures, each "from" a different client behind the proxy
            client.post(
                "/accounts/login/",
                {"username": f"x{index}", "password": "x"},
                HTTP_X_FORWARDED_FOR=f"203.0.113.{index}",
            )
        ok = client.post(
            "/accounts/login/", {"username": "ann1", "password": "pw-ann1"}, HTTP_X_FORWARDED_FOR="203.0.113.9"
        )
        assert ok.status_code == expected
