"""Blinding, route by route: every GET endpoint in the URL conf, as annotator A, with every
id that could point at annotator B's work, must not reveal B's labels while B is coding."""

from __future__ import annotations

import itertools

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from annotation.models import Assignment
from tests.annotation.test_views import HTMX, form, shared_run_assignments
from tests.conftest import client_for, mode_code

pytestmark = pytest.mark.django_db
SECRET = "B-PRIVATE-RATIONALE-7f3a"


def _routes(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # the Django admin is for admins only (read-only for coding data)
            yield from _routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def _fill(route: str, ids: list[int]) -> list[str]:
    names = [part.split(">")[0].split(":")[-1] for part in route.split("<")[1:]]
    if not names:
        return ["/" + route]
    urls = []
    for combo in itertools.product(ids, repeat=len(names)):
        url = route
        for name, value in zip(names, combo, strict=True):
            url = url.replace(f"<int:{name}>", str(value)).replace(f"<{name}>", str(value))
        urls.append("/" + url)
    return urls


def test_no_route_reveals_another_annotators_labels(study, trio, codebook):
    a, b = trio[0], trio[1]
    mine, theirs = shared_run_assignments(study, a, b)
    code = mode_code(codebook, "stale-handoff")
    saved = client_for(b).post(f"/annotate/{theirs.pk}/save/", form(code, 1, rationale=SECRET), **HTMX)
    assert saved.status_code == 200
    ids = sorted(
        {
            theirs.pk,
            theirs.run_id,
            mine.pk,
            mine.run_id,
            study.pk,
            codebook.pk,
            *Assignment.objects.filter(study=study).values_list("pk", flat=True),
        }
    )[:8]
    client, api = client_for(a), APIClient()
    api.force_authenticate(a)
    checked = 0
    for route in _routes():
        for url in _fill(route, ids):
            for response in (client.get(url), client.get(url, **HTMX), api.get(url)):
                body = b"".join(response.streaming_content) if response.streaming else response.content
                assert SECRET.encode() not in body, f"{url} leaks B's labels"
                checked += 1
    assert checked > 100
