"""Error pages: the site's layout for people, JSON under /api/ (what the API's clients parse)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import client_for, submit_disagreement

pytestmark = pytest.mark.django_db

NAV = "My queue"  # the signed-in navigation of templates/base.html


def page(response) -> str:
    assert response["Content-Type"].startswith("text/html")
    return response.content.decode()


@pytest.fixture
def failing_urls(settings):
    settings.ROOT_URLCONF = "tests.error_urls"


def test_an_unknown_path_is_the_styled_404(annotator):
    response = client_for(annotator).get("/no-such-page/")
    assert response.status_code == 404
    body = page(response)
    assert "Page not found" in body and "/no-such-page/" in body and NAV in body
    assert 'href="/"' in body  # back to the person's start page


def test_a_404_never_repeats_why(study, codebook, trio, adjudicator):
    """A 404 can mean "not yours": the page must not say more than "not found"."""
    discussion = submit_disagreement(study, study.runs.order_by("pk").first().pk, codebook)
    response = client_for(trio[0]).get(f"/annotate/adjudication/{discussion.pk}/")
    assert response.status_code == 404
    body = page(response)
    assert "Page not found" in body and "adjudicator" not in body


def test_permission_denied_is_the_styled_403_with_its_reason(study, trio):
    response = client_for(trio[0]).get(f"/annotate/studies/{study.pk}/")
    assert response.status_code == 403
    body = page(response)
    assert "Not allowed" in body and "Dashboards are for the study&#x27;s adjudicator and admins." in body
    assert NAV in body


def test_a_403_without_a_reason_says_so_plainly(annotator, failing_urls):
    response = client_for(annotator).get("/refuse-quietly/")
    assert response.status_code == 403
    assert "Not allowed" in page(response) and "may not open this page" in page(response)


def test_permission_denied_outside_drf_is_json_under_api(annotator, failing_urls):
    client = client_for(annotator)
    response = client.get("/api/refuse/")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only the study's adjudicator may do this."}
    html = client.get("/refuse/")
    assert html.status_code == 403 and "Only the study&#x27;s adjudicator may do this." in page(html)


def test_a_crash_is_the_styled_500_without_navigation(annotator, failing_urls):
    client = client_for(annotator)
    client.raise_request_exception = False
    response = client.get("/boom/")
    assert response.status_code == 500
    body = page(response)
    assert "Something went wrong" in body and 'class="brand"' in body and "parallax.css" in body
    assert NAV not in body  # rendered without the request's context: nothing that may fail again
    assert "a bug" not in body and "Traceback" not in body


def test_a_crash_under_api_is_json(annotator, failing_urls):
    client = client_for(annotator)
    client.raise_request_exception = False
    response = client.get("/api/boom/")
    assert response.status_code == 500 and response.json() == {"detail": "Server error."}


def test_a_bad_request_is_styled_and_json_under_api(annotator):
    """A Host header the site does not serve is Django's SuspiciousOperation: 400."""
    client = client_for(annotator)
    html = client.get("/trajectories/", HTTP_HOST="evil.example")
    assert html.status_code == 400 and "Bad request" in page(html)
    api = client.get("/api/runs/", HTTP_HOST="evil.example")
    assert api.status_code == 400 and api.json() == {"detail": "Bad request."}


def test_a_form_without_its_csrf_token_is_the_styled_403(study, codebook, trio):
    discussion = submit_disagreement(study, study.runs.order_by("pk").first().pk, codebook)
    client = Client(enforce_csrf_checks=True)
    client.force_login(trio[0])
    response = client.post(f"/annotate/discussions/{discussion.pk}/comment/", {"text": "hi"})
    assert response.status_code == 403
    body = page(response)
    assert "Not allowed" in body and "security token" in body and NAV in body
    assert not discussion.comments.exists()


def test_the_404_offers_anonymous_visitors_the_login(db):
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    body = page(response)
    assert 'href="/accounts/login/"' in body and "start page" not in body and NAV not in body


@pytest.mark.parametrize("path", ["/database-gone/", "/api/database-gone/"])
def test_a_database_that_does_not_answer_is_a_503_with_retry_after(annotator, failing_urls, path):
    """Found restarting PostgreSQL under load: 28 answers of 500 in 4 s. Now: 503, when to try again, and a page
    (or, under /api/, JSON) that says it is brief."""
    client = client_for(annotator)
    client.raise_request_exception = False
    response = client.get(path)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    text = response.content.decode()
    assert ("briefly unavailable" in text) and ("Try again in 5 seconds" in text or path.startswith("/api/"))
