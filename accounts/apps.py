from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from . import throttle

        def failed(sender, credentials, request=None, **kwargs):
            if request is not None:
                throttle.record_failure(request, str(credentials.get("username", "")))

        def succeeded(sender, request, user, **kwargs):
            if request is not None:
                throttle.record_success(request, user.get_username())

        # Every password check counts, whichever page or script asked (the admin included).
        user_login_failed.connect(failed, weak=False, dispatch_uid="parallax-login-failed")
        user_logged_in.connect(succeeded, weak=False, dispatch_uid="parallax-login-succeeded")
