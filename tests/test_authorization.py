"""The authorization matrix: every route in the URL conf × {anonymous, an annotator on their own
object, an annotator on someone else's object, the study's adjudicator, an admin}, for GET and for
POST. A route missing from EXPECTED fails the test: new routes must be classified here. Every HTML page it
renders must show neither template syntax nor a literal "None" in its visible text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from rest_framework.test import APIClient

from annotation.annotation_md import parse_annotation_md
from annotation.models import Assignment, PublishedRecord
from annotation.selectors.exports import EXPORT_KINDS
from annotation.services.pilot import pilot_create
from tests.factories import client_for, submit_disagreement
from tests.routes import routes
from trajectories.models import AgentContext, ImportBatch, RunFile

pytestmark = pytest.mark.django_db
ROLES = ("anon", "own", "other", "adjudicator", "admin")

# route -> (GET statuses per role, POST statuses per role); POST is sent with a valid CSRF token
# (the test client), an empty or minimal body: it checks who is let in, not what the form does.
# Reading a row: (GET for anon, own, other, adjudicator, admin), (POST for the same five).
# 302 for anon = sent to the login page; 403 = the role may not; 404 = not yours (blind, so an id of
# someone else's work is never confirmed); 405 = wrong method; 400/422 = let in, empty form refused.
EXPECTED: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "": ((302, 302, 302, 302, 302), (302, 405, 405, 405, 405)),  # role-aware landing (GET only)
    "accounts/login/": ((200, 200, 200, 200, 200), (200, 200, 200, 200, 200)),
    "admin/login/": ((302, 302, 302, 302, 302), (302, 302, 302, 302, 302)),  # to the one login page
    "accounts/logout/": ((302, 405, 405, 405, 405), (302, 302, 302, 302, 302)),
    "trajectories/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/runs/<int:run_id>/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/runs/<int:run_id>/timeline/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/runs/<int:run_id>/contexts/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/runs/<int:run_id>/contexts/<int:context_id>/events/": (
        (302, 200, 404, 200, 200),
        (302, 405, 405, 405, 405),
    ),
    "trajectories/metrics.csv": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/tests.csv": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "trajectories/imports/": ((302, 403, 403, 403, 200), (302, 403, 403, 403, 200)),
    "trajectories/runs/<int:run_id>/files/<int:file_id>/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    # without ?a= there is no anchor to follow: 404 for everyone let in (tests/trajectories/test_run_files.py)
    "trajectories/runs/<int:run_id>/anchor/": ((302, 404, 404, 404, 404), (302, 405, 405, 405, 405)),
    "trajectories/imports/<int:batch_id>/": ((302, 403, 403, 403, 200), (302, 405, 405, 405, 405)),
    "annotate/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/next/": ((302, 302, 302, 302, 302), (302, 405, 405, 405, 405)),
    "annotate/<int:assignment_id>/": ((302, 200, 404, 404, 404), (302, 405, 405, 405, 405)),
    "annotate/<int:assignment_id>/save/": ((302, 405, 405, 405, 405), (302, 422, 404, 404, 404)),
    "annotate/<int:assignment_id>/submit/": ((302, 405, 405, 405, 405), (302, 422, 404, 404, 404)),
    "annotate/<int:assignment_id>/revise/": ((302, 405, 405, 405, 405), (302, 422, 404, 404, 404)),
    "annotate/<int:assignment_id>/skip/": ((302, 405, 405, 405, 405), (302, 422, 404, 404, 404)),
    # showing the hints of the run being coded: coder1 submitted it here (a discussion), so the default policy
    # lets them (302 back to the page, the panel shown); someone else's coding is never confirmed (404)
    "annotate/<int:assignment_id>/hints/": ((302, 405, 405, 405, 405), (302, 302, 404, 404, 404)),
    "annotate/discussions/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/discussions/<int:discussion_id>/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/discussions/<int:discussion_id>/comment/": ((302, 405, 405, 405, 405), (302, 302, 404, 302, 302)),
    "annotate/discussions/<int:discussion_id>/resolve/": ((302, 405, 405, 405, 405), (302, 302, 404, 302, 302)),
    "annotate/adjudication/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    # the discussion here is open, not escalated: the adjudicator's ruling on it is refused as the wrong state (409)
    "annotate/adjudication/<int:discussion_id>/": ((302, 404, 404, 200, 404), (302, 404, 404, 409, 404)),
    "annotate/studies/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/studies/<int:study_id>/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    # designing a study: adjudicators and admins create; a study's own adjudicator and admins manage it
    "annotate/studies/new/": ((302, 403, 403, 200, 200), (302, 403, 403, 422, 422)),
    "annotate/studies/<int:study_id>/manage/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    # without an `action` the change is refused as a bad parameter (400) for those let in
    "annotate/studies/<int:study_id>/manage/change/": ((302, 405, 405, 405, 405), (302, 403, 403, 400, 400)),
    "annotate/studies/<int:study_id>/advantage/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    # analysis settings: only the study's lead; an empty form is refused with its fields named (422)
    "annotate/studies/<int:study_id>/settings/": ((302, 403, 403, 200, 200), (302, 403, 403, 422, 422)),
    "annotate/studies/<int:study_id>/statistics/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    # suggestions learned from gold: the study's lead only; an empty training form names its seed (422), the
    # progress line without ?model= is a bad parameter (400)
    "annotate/studies/<int:study_id>/suggestions/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/studies/<int:study_id>/suggestions/train/": ((302, 405, 405, 405, 405), (302, 403, 403, 422, 422)),
    "annotate/studies/<int:study_id>/suggestions/status/": ((302, 403, 403, 400, 400), (302, 405, 405, 405, 405)),
    # annotators' queues by uncertainty: without `order` the form is refused with the field named (422)
    "annotate/studies/<int:study_id>/suggestions/queue-order/": (
        (302, 405, 405, 405, 405),
        (302, 403, 403, 422, 422),
    ),
    "annotate/studies/<int:study_id>/statistics/refresh/": ((302, 405, 405, 405, 405), (302, 403, 403, 302, 302)),
    "annotate/studies/<int:study_id>/advantage/<int:run_id>/": ((302, 405, 405, 405, 405), (302, 403, 403, 404, 404)),
    "annotate/studies/<int:study_id>/runs/<int:run_id>/history/": (
        (302, 403, 403, 200, 200),
        (302, 405, 405, 405, 405),
    ),
    # one of the study's published files of the pair, as published (text/plain or JSON)
    "annotate/studies/<int:study_id>/runs/<int:run_id>/published/<int:record_id>/": (
        (302, 403, 403, 200, 200),
        (302, 405, 405, 405, 405),
    ),
    # an empty POST names no codebook version to move to: 422
    "annotate/studies/<int:study_id>/codebook/": ((302, 403, 403, 200, 200), (302, 403, 403, 422, 422)),
    "annotate/studies/<int:study_id>/bundle.zip": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/studies/<int:study_id>/export/<slug:kind>.csv": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/pilot/<int:pilot_id>/": ((302, 200, 404, 404, 404), (302, 405, 405, 405, 405)),
    "annotate/pilot/<int:pilot_id>/runs/<int:run_id>/": ((302, 200, 404, 404, 404), (302, 302, 404, 404, 404)),
    "annotate/pilot/<int:pilot_id>/consolidate/": ((302, 403, 403, 403, 200), (302, 405, 405, 405, 405)),
    "annotate/pilot/<int:pilot_id>/promote/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 302)),
    "annotate/pilot/<int:pilot_id>/draft/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 302)),
    "codebooks/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "codebooks/import/": ((302, 403, 403, 403, 200), (302, 403, 403, 403, 422)),
    "codebooks/<int:codebook_id>/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "codebooks/<int:codebook_id>/export.csv": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "codebooks/<int:codebook_id>/new-version/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 302)),
    "codebooks/<int:codebook_id>/freeze/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 302)),
    # the codebook here is frozen: the editor sends an admin back to its page
    "codebooks/<int:codebook_id>/edit/": ((302, 403, 403, 403, 302), (302, 403, 403, 403, 302)),
    "api/runs/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "api/runs/<int:pk>/": ((403, 200, 404, 200, 200), (403, 405, 405, 405, 405)),
    "api/runs/<int:pk>/events/": ((403, 200, 404, 200, 200), (403, 405, 405, 405, 405)),
    "api/imports/": ((403, 405, 405, 405, 405), (403, 403, 403, 403, 400)),
    "api/imports/<int:pk>/": ((403, 403, 403, 403, 200), (403, 405, 405, 405, 405)),
    "api/codebooks/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "api/codebooks/<int:pk>/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "api/assignments/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "api/annotations/<int:assignment_id>/": ((403, 200, 404, 404, 404), (403, 405, 405, 405, 405)),
    "api/annotations/<int:assignment_id>/submit/": ((403, 405, 405, 405, 405), (403, 400, 404, 404, 404)),
    "api/studies/<int:study_id>/exports/<slug:kind>/": ((403, 403, 403, 200, 200), (403, 405, 405, 405, 405)),
    "api/schema/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "api/docs/": ((403, 200, 200, 200, 200), (403, 405, 405, 405, 405)),
    "healthz": ((200, 200, 200, 200, 200), (405, 405, 405, 405, 405)),
}


class _VisibleText(HTMLParser):
    """The text a person sees: not the head, scripts, styles or tooltips (<title>), nor attributes."""

    HIDDEN = frozenset({"head", "script", "style", "title", "template", "noscript"})

    def __init__(self) -> None:
        super().__init__()
        self.hidden = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.hidden += 1

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.hidden:
            self.hidden -= 1

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def test_visible_text_leaves_out_what_is_not_shown():
    html = "<html><head><title>None</title></head><body><p>a</p><svg><title>None</title></svg><p>b None</p></body>"
    assert visible_text(html) == "a b None"


def world(study, codebook, trio, adjudicator):
    """coder1's own objects and someone else's, for every kind of id in the URL conf."""
    me, other1, other2 = trio
    own_assignment = Assignment.objects.filter(study=study, annotator=me).order_by("pk").first()
    mine = set(Assignment.objects.filter(study=study, annotator=me).values_list("run_id", flat=True))
    foreign_run = study.runs.exclude(pk__in=mine).order_by("pk").first()
    foreign_assignment = Assignment.objects.filter(study=study, run=foreign_run).first()
    # a discussion coder1 takes part in, and one between the two others
    discussions = {}
    for run_id, key in ((own_assignment.run_id, "own"), (foreign_run.pk, "other")):
        discussions[key] = submit_disagreement(study, run_id, codebook)
    own_pilot = pilot_create(
        name="mine", annotators=[me, other1], base_codebook=codebook, run_ids=[own_assignment.run_id]
    )
    other_pilot = pilot_create(
        name="theirs", annotators=[other1, other2], base_codebook=codebook, run_ids=[foreign_run.pk]
    )
    batch = ImportBatch.objects.create(created_by=None, status="done")
    records = {}  # a published annotation.md of each run, kept as data (shown on the run's history page)
    for run_id, key in ((own_assignment.run_id, "own"), (foreign_run.pk, "other")):
        text = "pair_id: t/codex\nverdict: patterns_retained\n\n# Notes\nparallel_anchor: `parallel/x.jsonl:1`\n"
        records[key] = PublishedRecord.objects.create(study=study, run_id=run_id, name="annotation.md", text=text,
                                                      data=parse_annotation_md(text).data())  # fmt: skip
    ids = {
        "own": {
            "run_id": own_assignment.run_id,
            "assignment_id": own_assignment.pk,
            "discussion_id": discussions["own"].pk,
            "pilot_id": own_pilot.pk,
            "record_id": records["own"].pk,
        },
        "other": {
            "run_id": foreign_run.pk,
            "assignment_id": foreign_assignment.pk,
            "discussion_id": discussions["other"].pk,
            "pilot_id": other_pilot.pk,
            "record_id": records["other"].pk,
        },
    }
    for key in ids:
        ids[key].update(
            study_id=study.pk,
            codebook_id=codebook.pk,
            batch_id=batch.pk,
            kind="labels",
            context_id=AgentContext.objects.filter(run_id=ids[key]["run_id"]).first().pk,
            file_id=RunFile.objects.filter(run_id=ids[key]["run_id"]).first().pk,
        )
    return ids


def url_for(route: str, ids: dict) -> str:
    url = "/" + route
    for name, value in ids.items():
        url = url.replace(f"<int:{name}>", str(value)).replace(f"<slug:{name}>", str(value))
    if "<int:pk>" in url:
        pk = {"api/runs/": ids["run_id"], "api/imports/": ids["batch_id"], "api/codebooks/": ids["codebook_id"]}
        url = url.replace("<int:pk>", str(next(v for k, v in pk.items() if route.startswith(k))))
    assert "<" not in url, url
    return url


def clients(trio, adjudicator, admin_user):
    def pair(user):
        if user is None:
            return Client(), APIClient()
        api = APIClient()
        api.force_authenticate(user)
        return client_for(user), api

    return {
        "anon": pair(None),
        "own": pair(trio[0]),
        "other": pair(trio[0]),
        "adjudicator": pair(adjudicator),
        "admin": pair(admin_user),
    }


def observed(study, codebook, trio, adjudicator, admin_user) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    ids = world(study, codebook, trio, adjudicator)
    table = {}
    for route in routes():
        row_get, row_post = [], []
        by_role = clients(trio, adjudicator, admin_user)  # fresh sessions: POST /logout/ ends one
        for role in ROLES:
            url = url_for(route, ids["other" if role == "other" else "own"])
            page, api = by_role[role]
            client = api if route.startswith("api/") else page
            response = client.get(url)
            row_get.append(response.status_code)
            if response.status_code == 200 and response.get("Content-Type", "").startswith("text/html"):
                body = response.content.decode()
                # A file's or an event's text is data, shown in <pre> as written: a JSON log line may hold "}}".
                markup = re.sub(r"<pre>.*?</pre>", "", body, flags=re.DOTALL)
                leaked = [mark for mark in ("{#", "#}", "{%", "%}", "{{", "}}") if mark in markup]
                assert not leaked, f"{url} as {role} shows template text {leaked}"
                nones = re.findall(r".{0,40}\bNone\b.{0,40}", visible_text(body))
                assert not nones, f"{url} as {role} shows a literal None: {nones}"
                title = re.search(r"<title>(.*?)</title>", body, re.S)  # a page, not a fragment
                if title:
                    assert "<" not in title[1] and title[1].strip(), f"{url} as {role} has the title {title[1]!r}"
            row_post.append(client.post(url, {}).status_code)
        table[route] = (tuple(row_get), tuple(row_post))
    return table


def test_authorization_matrix(study, codebook, trio, adjudicator, admin_user):
    table = observed(study, codebook, trio, adjudicator, admin_user)
    unclassified = sorted(set(table) - set(EXPECTED))
    assert not unclassified, f"new route(s) to classify in EXPECTED: {unclassified}"
    wrong = {route: (table[route], EXPECTED[route]) for route in table if table[route] != EXPECTED[route]}
    assert not wrong, "route: (observed, expected)\n" + "\n".join(f"{r}: {v}" for r, v in wrong.items())


def test_every_export_kind_is_for_the_studys_lead_only(study, trio, adjudicator, admin_user):
    """The matrix above opens one export kind; each kind (the signatures against gold included) is
    refused to annotators alike, on the page and on the API."""
    page = EXPECTED["annotate/studies/<int:study_id>/export/<slug:kind>.csv"][0]
    api = EXPECTED["api/studies/<int:study_id>/exports/<slug:kind>/"][0]
    for kind in EXPORT_KINDS:
        by_role = clients(trio, adjudicator, admin_user)
        got_page = tuple(
            by_role[r][0].get(f"/annotate/studies/{study.pk}/export/{kind}.csv").status_code for r in ROLES
        )
        got_api = tuple(by_role[r][1].get(f"/api/studies/{study.pk}/exports/{kind}/").status_code for r in ROLES)
        assert (got_page, got_api) == (page, api), kind
