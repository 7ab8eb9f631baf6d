"""Failed-login throttling (per username + address, and per address), kept in the cache."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's address; behind a trusted reverse proxy, the first X-Forwarded-For entry."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if settings.PARALLAX_TRUST_X_FORWARDED_FOR and forwarded:
        return forwarded.split(",")[0].strip()
    return request.META.get("REMOTE_ADDR", "?")


def _keys(request: HttpRequest, username: str) -> tuple[str, str]:
    address = client_address(request)
    return f"login-fail:{address}:{username.strip().lower()}", f"login-fail-ip:{address}"


def is_locked(request: HttpRequest, username: str) -> bool:
    user_key, ip_key = _keys(request, username)
    return (
        cache.get(user_key, 0) >= settings.PARALLAX_LOGIN_FAILURES_PER_USER
        or cache.get(ip_key, 0) >= settings.PARALLAX_LOGIN_FAILURES_PER_ADDRESS
    )


def record_failure(request: HttpRequest, username: str) -> None:
    for key in _keys(request, username):
        cache.add(key, 0, settings.PARALLAX_LOGIN_LOCKOUT_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, settings.PARALLAX_LOGIN_LOCKOUT_SECONDS)


def record_success(request: HttpRequest, username: str) -> None:
    cache.delete(_keys(request, username)[0])
