from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found

from config.htmx import HtmxHttpRequest


def not_found(request: HtmxHttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: JSON for the API's paths (what its clients parse), the site's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


@login_not_required
@require_GET
def healthz(request: HtmxHttpRequest) -> HttpResponse:
    """Liveness + database reachability for the compose healthcheck."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok", content_type="text/plain")
