"""The dashboard in a real browser while the study changes: figures that are not current say so, and
the page reloads itself with the new ones once the worker has stored them (htmx polling)."""

from __future__ import annotations

import pytest
from django.db.models import F
from playwright.sync_api import expect

from annotation.analysis.store import analysis_refresh
from annotation.models import Study
from tests.integration.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_stale_figures_are_marked_and_replaced_when_the_worker_lands(page, live_server, study, adjudicator):
    analysis_refresh(study_id=study.pk)
    # A change whose refresh has not run yet (the worker is busy): the inputs' version moves on.
    Study.objects.filter(pk=study.pk).update(statistics_version=F("statistics_version") + 1)
    login(page, live_server, "senior", "pw-senior")
    page.goto(f"{live_server.url}/annotate/studies/{study.pk}/")
    status = page.locator("#statistics-status")
    assert "Not current" in status.inner_text()
    analysis_refresh(study_id=study.pk)  # the worker lands the new figures
    expect(page.locator("#statistics-status")).to_contain_text("Statistics computed", timeout=15_000)
    assert "Not current" not in page.locator("#statistics-status").inner_text()
