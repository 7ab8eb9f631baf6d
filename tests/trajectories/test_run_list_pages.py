"""The run list a page at a time (keyset): every visible run once, in order, filters kept across
pages, and a clear 400 for a cursor that is not one."""

from __future__ import annotations

import pytest

from tests.factories import client_for
from trajectories import views

pytestmark = pytest.mark.django_db


def _walk(client, **params) -> list:
    seen, pages = [], 0
    while True:
        response = client.get("/trajectories/", params)
        assert response.status_code == 200
        page = response.context["page"]
        seen += page.items
        pages += 1
        if page.after is None:
            return seen
        params = {**params, "after": page.after}


def test_following_next_lists_every_run_once_in_order(study, adjudicator, monkeypatch):
    monkeypatch.setattr(views, "RUNS_PER_PAGE", 5)
    client = client_for(adjudicator)
    runs = _walk(client)
    assert len(runs) == len({r.pk for r in runs}) == 12
    keys = [(r.task.benchmark.name, r.task.external_id, r.agent.name, r.mode) for r in runs]
    assert keys == sorted(keys)
    only = _walk(client, mode="sequential")  # the filter holds on every page
    assert len(only) == 6 and {r.mode for r in only} == {"sequential"}
    first = client.get("/trajectories/", {"mode": "sequential"}).content.decode()
    assert "6 runs" in first and 'hx-target="#run-table"' in first and "mode=sequential&amp;after=" in first


def test_an_annotator_pages_through_only_their_runs_and_twins(study, trio, monkeypatch):
    monkeypatch.setattr(views, "RUNS_PER_PAGE", 3)
    runs = _walk(client_for(trio[0]))
    assert len(runs) == 8  # four assigned runs and their twins


def test_a_cursor_that_is_not_a_row_number_is_a_400(study, adjudicator):
    response = client_for(adjudicator).get("/trajectories/", {"after": "1; drop table"})
    assert response.status_code == 400 and "must be the number of a row" in response.content.decode()
