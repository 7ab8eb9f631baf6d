"""Failed-login throttling (per username + address, and per address), kept in the cache — or, when the cache
(Redis) does not answer, in the database (`LoginFailure`), so that a login neither fails nor goes unthrottled
while Redis is away. The cache's socket timeouts are short (settings.CACHES): a Redis that hangs costs a second.

One throttle for every login path: the authentication backend (accounts/backends.py) refuses a
locked username or address whoever asks — the login page, the admin, a script calling
`authenticate()` — and Django's login signals count failures and successes (accounts/apps.py)."""

from __future__ import annotations

from datetime import timedelta

import redis
from django.conf import settings
from django.core.cache import cache
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone

from .models import LoginFailure

CACHE_DOWN = (redis.ConnectionError, redis.TimeoutError)


def client_address(request: HttpRequest) -> str:
    """The client's address. Behind N trusted reverse proxies (PARALLAX_TRUSTED_PROXIES), the address
    the outermost trusted proxy saw: the N-th X-Forwarded-For entry from the right, counting the
    connecting proxy (REMOTE_ADDR) as the last hop. Entries left of it are the client's own claims
    and never used: a client cannot pick its address by sending X-Forwarded-For."""
    remote = request.META.get("REMOTE_ADDR", "?")
    trusted = settings.PARALLAX_TRUSTED_PROXIES
    if trusted <= 0:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    hops.append(remote)
    return hops[-(trusted + 1)] if len(hops) > trusted else hops[0]


def _keys(request: HttpRequest, username: str) -> tuple[str, str]:
    address = client_address(request)
    return f"login-fail:{address}:{username.strip().lower()}", f"login-fail-ip:{address}"


def _count(key: str) -> int:
    try:
        return cache.get(key, 0)
    except CACHE_DOWN:
        row = LoginFailure.objects.filter(key=key, expires_at__gt=timezone.now()).values_list("count", flat=True)
        return row.first() or 0


def is_locked(request: HttpRequest, username: str) -> bool:
    user_key, ip_key = _keys(request, username)
    return (
        _count(user_key) >= settings.PARALLAX_LOGIN_FAILURES_PER_USER
        or _count(ip_key) >= settings.PARALLAX_LOGIN_FAILURES_PER_ADDRESS
    )


def _count_up(key: str) -> None:
    window = settings.PARALLAX_LOGIN_LOCKOUT_SECONDS
    try:
        cache.add(key, 0, window)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, window)
    except CACHE_DOWN:
        now = timezone.now()
        LoginFailure.objects.filter(key=key, expires_at__lte=now).delete()
        row, created = LoginFailure.objects.get_or_create(
            key=key, defaults={"count": 1, "expires_at": now + timedelta(seconds=window)}
        )
        if not created:
            LoginFailure.objects.filter(pk=row.pk).update(count=F("count") + 1)


def record_failure(request: HttpRequest, username: str) -> None:
    for key in _keys(request, username):
        _count_up(key)


def record_success(request: HttpRequest, username: str) -> None:
    key = _keys(request, username)[0]
    try:
        cache.delete(key)
    except CACHE_DOWN:
        LoginFailure.objects.filter(key=key).delete()
