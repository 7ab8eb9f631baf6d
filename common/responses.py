"""Answers the views share."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def invalid_parameter(request: HttpRequest, message: str) -> HttpResponse:
    """400 for a malformed query parameter (a page cursor, a filter): the styled page, naming the
    parameter and what it should be."""
    return render(request, "400.html", {"message": message}, status=400)
