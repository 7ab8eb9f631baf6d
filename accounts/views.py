from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from . import throttle


class LoginView(auth_views.LoginView):
    """Django's login, refusing further attempts after repeated failures (HTTP 429)."""

    def post(self, request, *args, **kwargs) -> HttpResponse:
        username = request.POST.get("username", "")
        if throttle.is_locked(request, username):
            form = self.get_form()
            form.errors.clear()
            context = self.get_context_data(form=form, locked=True)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    # Failures and successes are counted by the login signals (accounts/apps.py), for every path.
