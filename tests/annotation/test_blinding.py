"""Blinding, route by route: every GET endpoint in the URL conf, as annotator A, with every
id that could point at annotator B's work, must not reveal B's labels while B is coding."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Assignment
from tests.factories import HTMX, client_for, coding_form, mode_code, shared_run_assignments
from tests.routes import fill, routes

pytestmark = pytest.mark.django_db
SECRET = "B-PRIVATE-RATIONALE-7f3a"


def test_no_route_reveals_another_annotators_labels(study, trio, codebook):
    a, b = trio[0], trio[1]
    mine, theirs = shared_run_assignments(study, a, b)
    code = mode_code(codebook, "stale-handoff")
    saved = client_for(b).post(f"/annotate/{theirs.pk}/save/", coding_form(code, 1, rationale=SECRET), **HTMX)
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
    for route in routes():
        for url in fill(route, ids):
            for response in (client.get(url), client.get(url, **HTMX), api.get(url)):
                body = b"".join(response.streaming_content) if response.streaming else response.content
                assert SECRET.encode() not in body, f"{url} leaks B's labels"
                checked += 1
    assert checked > 100
