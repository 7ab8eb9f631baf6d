"""Authentication with the login throttle in front of every path that checks a password."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from . import throttle


class ThrottledModelBackend(ModelBackend):
    """Django's model backend, refusing (even a right password) while the username or the address
    is locked out after repeated failures. PermissionDenied stops `authenticate()` outright."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is not None and throttle.is_locked(request, username or kwargs.get("email") or ""):
            raise PermissionDenied("too many failed logins; try again later")
        return super().authenticate(request, username=username, password=password, **kwargs)
