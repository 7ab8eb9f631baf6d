from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpResponse
from django.views.decorators.http import require_GET

from config.htmx import HtmxHttpRequest


@login_not_required
@require_GET
def healthz(request: HtmxHttpRequest) -> HttpResponse:
    """Liveness + database reachability for the compose healthcheck."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok", content_type="text/plain")
