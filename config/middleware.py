"""Project-wide request guards."""

from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse


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
