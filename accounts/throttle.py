"""Failed-login throttling (per username + address, and per address), kept in the cache.

One throttle for every login path: the authentication backend (accounts/backends.py) refuses a
locked username or address whoever asks — the login page, the admin, a script calling
`authenticate()` — and Django's login signals count failures and successes (accounts/apps.py)."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


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
