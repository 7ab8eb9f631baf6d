from __future__ import annotations

import time
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
    for trusted, expected in ((0, 429), (1, 302)):
        cache.clear()
        settings.PARALLAX_TRUSTED_PROXIES = trusted
        client = Client()
        for index in range(2):  # two failures, each from a different client behind the proxy
            client.post(
                "/accounts/login/",
                {"username": f"x{index}", "password": "x"},
                HTTP_X_FORWARDED_FOR=f"203.0.113.{index}",
            )
        ok = client.post(
            "/accounts/login/", {"username": "ann1", "password": "pw-ann1"}, HTTP_X_FORWARDED_FOR="203.0.113.9"
        )
        assert ok.status_code == expected


def test_a_client_cannot_pick_its_address_behind_a_trusted_proxy(annotator, settings):
    """Behind one proxy, the throttle keys on the address the proxy appended (the right-most entry):
    an attacker writing a new left-most entry on every attempt is still one address."""
    settings.PARALLAX_TRUSTED_PROXIES = 1
    settings.PARALLAX_LOGIN_FAILURES_PER_ADDRESS = 30
    client = Client()
    for index in range(50):
        forged = f"10.0.{index}.1, 198.51.100.7"  # the client's forged hop, then what the proxy saw
        response = client.post(
            "/accounts/login/", {"username": f"u{index}", "password": "x"}, HTTP_X_FORWARDED_FOR=forged
        )
    assert response.status_code == 429


def test_the_admin_has_no_login_of_its_own_to_bypass_the_throttle(annotator, settings):
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    annotator.is_staff = annotator.is_superuser = True
    annotator.save()
    client = Client()
    for _ in range(40):
        response = client.post("/admin/login/?next=/admin/", {"username": "ann1", "password": "wrong"})
        assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/admin/"
    for _ in range(5):
        client.post("/accounts/login/", {"username": "ann1", "password": "wrong"})
    # Locked: the right password is refused on the login page (429) and by authenticate() itself,
    # whoever calls it (the admin's form, a script).
    assert client.post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"}).status_code == 429
    request = RequestFactory().post("/admin/login/")
    assert authenticate(request, username="ann1", password="pw-ann1") is None
    assert client.get("/admin/").status_code == 302


def test_demo_users_never_touch_real_accounts(settings, db):
    from django.contrib.auth.models import Group, User
    from django.core.management import CommandError

    from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR

    for role in (ANNOTATOR, ADJUDICATOR, ADMIN):
        Group.objects.get_or_create(name=role)
    real = User.objects.create_user("admin", password="a-real-secret")
    settings.DEBUG = False
    with pytest.raises(CommandError, match="demo users have a public password"):
        call_command("create_demo_users", stdout=StringIO())
    assert not User.objects.filter(username="annotator1").exists()
    out = StringIO()
    call_command("create_demo_users", "--i-know-this-is-a-demo", stdout=out)
    real.refresh_from_db()
    assert real.check_password("a-real-secret") and not real.is_superuser  # the existing user is untouched
    assert "kept admin" in out.getvalue() and User.objects.get(username="annotator1").check_password("parallax-demo")


def test_api_answers_json_only(annotator, settings):
    client = APIClient()
    client.force_authenticate(annotator)
    missing = client.get("/api/runs/-1/")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not found."}
    nowhere = client.get("/api/no-such-endpoint/")
    assert nowhere.status_code == 404 and nowhere["Content-Type"] == "application/json"
    page = client.get("/api/assignments/", HTTP_ACCEPT="text/html")
    assert page["Content-Type"].startswith("application/json")  # no browsable HTML API outside development


def test_api_page_numbers_are_strict(annotator):
    client = APIClient()
    client.force_authenticate(annotator)
    for bad in ("", "0", "x", "-1", "1.5"):
        response = client.get("/api/assignments/", {"page": bad})
        assert response.status_code == 400 and "page" in response.json(), bad
    assert client.get("/api/assignments/", {"page": "1"}).status_code == 200


REDIS_AWAY = {  # a Redis that does not answer: nothing listens on port 1
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}


def test_with_redis_away_login_works_and_is_still_throttled_from_the_database(annotator, settings):
    """Found probing with Redis paused: the login answered 500 after 6.7 s. The throttle's counters now fall back
    to the database: the right password logs in, and repeated failures still lock."""
    settings.CACHES = REDIS_AWAY
    settings.PARALLAX_LOGIN_FAILURES_PER_USER = 3
    started = time.monotonic()
    assert Client().post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"}).status_code == 302
    assert time.monotonic() - started < 5
    client = Client()
    for _ in range(3):
        assert client.post("/accounts/login/", {"username": "ann1", "password": "wrong"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "ann1", "password": "pw-ann1"}).status_code == 429


def test_an_invalid_or_missing_api_token_is_a_401_saying_how_to_authenticate(db):
    for headers in ({"HTTP_AUTHORIZATION": "Token not-a-real-token"}, {}):
        response = APIClient().get("/api/assignments/", **headers)
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
