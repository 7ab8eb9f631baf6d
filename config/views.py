from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness + database reachability for the compose healthcheck."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok", content_type="text/plain")
