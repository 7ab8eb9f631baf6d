"""Route by route: GET never changes anything; every unsafe method needs a CSRF token."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.test import Client

from annotation.models import Assignment, Discussion
from tests.factories import client_for, submit_disagreement
from tests.routes import fill, routes

pytestmark = pytest.mark.django_db


def db_state() -> dict[str, tuple]:
    """Row count and a checksum of every table's ids and update times."""
    state = {}
    for model in apps.get_models():
        rows = model.objects.all()
        stamp = "updated_at" if any(f.name == "updated_at" for f in model._meta.fields) else "pk"
        state[model._meta.label] = (rows.count(), tuple(rows.order_by("pk").values_list("pk", stamp)))
    return state


@pytest.fixture
def busy_study(study, codebook):
    """A study with a submitted pair, an open discussion and a draft."""
    submit_disagreement(study, study.runs.order_by("pk").first().pk, codebook)
    assert Discussion.objects.exists()
    return study


def candidate_ids(study) -> list[int]:
    ids = {
        1,
        2,
        study.pk,
        *Assignment.objects.filter(study=study).values_list("pk", flat=True)[:3],
        *study.runs.values_list("pk", flat=True)[:2],
        *Discussion.objects.values_list("pk", flat=True),
    }
    return sorted(ids)[:6]


def test_get_never_changes_state(busy_study, trio, adjudicator, admin_user):
    ids = candidate_ids(busy_study)
    clients = [client_for(trio[0]), client_for(adjudicator), client_for(admin_user)]
    before = db_state()
    visited = 0
    for route in routes():
        for url in fill(route, ids, slugs=("labels", "finals")):
            for client in clients:
                response = client.get(url)
                if response.streaming:
                    b"".join(response.streaming_content)
                visited += 1
    after = db_state()
    changed = {
        label for label in before if before[label] != after[label] and not label.startswith(("sessions.", "admin."))
    }
    assert not changed, f"GET changed {changed}"
    assert visited > 300


def test_unsafe_methods_need_a_csrf_token(busy_study, trio, adjudicator, admin_user):
    ids = candidate_ids(busy_study)
    before = db_state()
    for user in (trio[0], adjudicator, admin_user):
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        for route in routes():
            for url in fill(route, ids[:3], slugs=("labels",)):
                for method in ("post", "put", "patch", "delete"):
                    response = getattr(client, method)(url, {"text": "x", "version": 1})
                    assert response.status_code in (403, 404, 405), f"{method.upper()} {url}: {response.status_code}"
    after = db_state()
    changed = {label for label in before if before[label] != after[label] and not label.startswith("sessions.")}
    assert not changed, f"unsafe requests without a CSRF token changed {changed}"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/runs/?task=a%00b", "/?agent=%00"])
def test_a_nul_in_the_query_string_is_a_400_naming_the_parameter(admin_user, path):
    """Found by schemathesis on PostgreSQL (text cannot hold NUL): it was a 500."""
    response = client_for(admin_user).get(path)
    assert response.status_code == 400
    assert ("'task'" if "task" in path else "'agent'") in response.content.decode()
