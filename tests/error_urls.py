"""The site's URLs plus views that fail on purpose, for tests/test_error_pages.py."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import OperationalError
from django.urls import path

from config.urls import handler400, handler403, handler404, handler500  # noqa: F401 (Django reads them here)
from config.urls import urlpatterns as site_urls


def boom(request):
    raise RuntimeError("a bug")


def refuse(request):
    raise PermissionDenied("Only the study's adjudicator may do this.")


def refuse_quietly(request):
    raise PermissionDenied


urlpatterns = [
    path("refuse-quietly/", refuse_quietly),
    path("boom/", boom),
    path("api/boom/", boom),
    path("refuse/", refuse),
    path("api/refuse/", refuse),
    *site_urls,
]


def database_gone(request):
    raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")


urlpatterns = [path("database-gone/", database_gone), path("api/database-gone/", database_gone), *urlpatterns]
