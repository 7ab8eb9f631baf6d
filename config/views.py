from __future__ import annotations

import sys

from django.contrib.auth.decorators import login_not_required
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect
from django.template import loader
from django.views.decorators.csrf import requires_csrf_token
from django.views.decorators.http import require_GET
from django.views.defaults import bad_request, page_not_found, permission_denied, server_error

from annotation.selectors.landing import landing_url
from common.htmx import HtmxHttpRequest

# The error pages: the site's layout for people (templates/4xx.html, 500.html), JSON for the API's
# clients, which parse every answer under /api/ (DRF answers its own views' errors the same way;
# these cover what reaches Django: unknown paths, errors raised outside DRF, crashes).


def _for_api(request: HtmxHttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request_page(request: HtmxHttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _for_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return bad_request(request, exception)


def forbidden(request: HtmxHttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403: the reason the view gave (PermissionDenied's message is written for the reader)."""
    if _for_api(request):
        return JsonResponse({"detail": str(exception or "") or "You may not do this."}, status=403)
    return permission_denied(request, exception)


def not_found(request: HtmxHttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: JSON for the API's paths (what its clients parse), the site's page elsewhere. The page
    never repeats the exception's text: a 404 may stand for "not yours", and must not say more."""
    if _for_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


RETRY_AFTER_S = 5  # a database restart or a Redis failover: seconds, not minutes


def _service_down() -> bool:
    """The request failed because the database or Redis did not answer (not because of a bug)."""
    import redis

    failure = sys.exc_info()[1]
    return isinstance(failure, (OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError))


@requires_csrf_token
def crashed(request: HtmxHttpRequest) -> HttpResponse:
    """500: rendered without the request's context (Django's rule: whatever failed may fail again),
    so the page has the layout but no navigation. When what failed is the database or Redis not answering
    (a restart, a failover), 503 with Retry-After and a page that says so: try again shortly."""
    if _service_down():
        if _for_api(request):
            response = JsonResponse({"detail": "Service briefly unavailable: try again shortly."}, status=503)
        else:
            response = HttpResponse(loader.get_template("503.html").render({"retry": RETRY_AFTER_S}), status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    if _for_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return server_error(request)


def csrf_failure(request: HtmxHttpRequest, reason: str = "") -> HttpResponse:
    """A form sent without a valid CSRF token (CSRF_FAILURE_VIEW): the styled 403, saying what to do.
    (The API's views are DRF's, which check CSRF themselves and answer JSON.)"""
    template = loader.get_template("403.html")
    message = "The form's security token was missing or out of date. Reload the page and try again."
    return HttpResponse(template.render({"exception": message}, request), status=403)


@require_GET
def home(request: HtmxHttpRequest) -> HttpResponseRedirect:
    """Where a signed-in person starts (also where login leads): annotation.selectors.landing.landing_url."""
    return redirect(landing_url(request.user))


@login_not_required
@require_GET
def healthz(request: HtmxHttpRequest) -> HttpResponse:
    """Liveness + database reachability for the compose healthcheck."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse("ok", content_type="text/plain")
