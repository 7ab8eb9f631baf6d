"""Project-wide request guards."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import resolve_url


class RejectNulQueryMiddleware:
    """A NUL character in the query string is never meaningful, and PostgreSQL text cannot hold
    one: a filter such as `?task=a%00b` would fail inside the database with a 500. Answer 400
    naming the parameter instead (form and API bodies are already checked by Django's and
    DRF's own ProhibitNullCharactersValidator)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                message = f"query parameter {key.replace(chr(0), '�')!r} contains a NUL character"
                if request.path.startswith("/api/"):
                    return JsonResponse({"detail": message}, status=400)
                return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


UPLOAD_PATHS = ("/trajectories/imports/", "/api/imports/")
MULTIPART_SLACK = 1024 * 1024  # form fields and multipart boundaries around the file


class UploadSizeMiddleware:
    """Refuse an over-size trajectory upload as soon as its declared length is known: before the
    body is read (the CSRF check and the form would read all of it first). 413, naming the size
    and the limit; the upload page also checks the file's size in the browser before sending."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.path in UPLOAD_PATHS:
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.PARALLAX_MAX_UPLOAD_BYTES
            if length > limit + MULTIPART_SLACK:
                message = f"the upload is {length:,} bytes; the limit is {limit:,} (PARALLAX_MAX_UPLOAD_BYTES)"
                if request.path.startswith("/api/"):
                    return JsonResponse({"detail": message}, status=413)
                return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    """Django's login requirement, except for htmx requests: a page whose session has ended (logged
    out in another tab, or expired) gets 401, never the login page swapped into one of its boxes.
    The page keeps what was typed and says how to log in again (annotate.js); the response names
    the login page in `X-Login-Url` so that the page can link to it."""

    def handle_no_permission(self, request, view_func):
        if request.headers.get("HX-Request") != "true":
            return super().handle_no_permission(request, view_func)
        response = HttpResponse(
            "Your session has ended: log in again. Nothing was saved by this request.",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["X-Login-Url"] = resolve_url(self.get_login_url(view_func))
        return response
