"""One crawl of every route in the URL conf, for every role, with one own and one foreign id per URL parameter
(tests/routes.py). It checks, route by route:

- authorization: who gets which status, GET and POST, against EXPECTED — a route missing there fails the test,
  new routes must be classified here;
- blinding: no response to an annotator (or to no one) shows the labels another annotator is still drafting on
  a run they both code;
- GET changes nothing: no GET writes a row (the SQL it ran), and the database is the same after all of them;
- unsafe methods need a CSRF token: POST, PUT, PATCH and DELETE without one are refused and change nothing;
- every HTML page and htmx fragment shows neither template syntax nor a literal "None" in its visible text
  (what a `<pre>` holds is data, shown as written), and a page's title is plain text.

Roles: anonymous; coder1 on their own objects ("own") and on someone else's ("other"); the study's
adjudicator; an admin. A missing id and an own id beside a foreign one are refused, never a server error."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotation.selectors.exports import EXPORT_KINDS
from tests.factories import ROUTE_SECRET as SECRET
from tests.factories import client_for, route_world
from tests.routes import parameters, routes, url_for, urls

pytestmark = pytest.mark.django_db
ROLES = ("anon", "own", "other", "adjudicator", "admin")
MISSING = 2_000_000_000  # an id no row has (within PostgreSQL's integer)

# route -> (GET statuses per role, POST statuses per role); POST is sent with a valid CSRF token
# (the test client), an empty or minimal body: it checks who is let in, not what the form does.
# Reading a row: (GET for anon, own, other, adjudicator, admin), (POST for the same five).
# 302 for anon = sent to the login page (401 under api/); 403 = the role may not; 404 = not yours (blind, so an id of
# someone else's work is never confirmed); 405 = wrong method; 400/422 = let in, empty form refused.
EXPECTED: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "": ((302, 302, 302, 302, 302), (302, 405, 405, 405, 405)),  # role-aware landing (GET only)
    "accounts/login/": ((200, 200, 200, 200, 200), (200, 200, 200, 200, 200)),
    "admin/login/": ((302, 302, 302, 302, 302), (302, 302, 302, 302, 302)),  # to the one login page
    "accounts/logout/": ((302, 405, 405, 405, 405), (302, 302, 302, 302, 302)),
    # an empty POST: the form again, its fields' errors named
    "accounts/password/": ((302, 200, 200, 200, 200), (302, 200, 200, 200, 200)),
    # people and their roles: admins only (an empty POST: refused, its field named)
    "accounts/people/": ((302, 403, 403, 403, 200), (302, 405, 405, 405, 405)),
    "accounts/people/add/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 422)),
    "accounts/people/roles/": ((302, 405, 405, 405, 405), (302, 403, 403, 403, 422)),
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
    # coder1's coding here is submitted and its run not under discussion: let in, refused as the wrong state (409)
    "annotate/<int:assignment_id>/revise/": ((302, 405, 405, 405, 405), (302, 409, 404, 404, 404)),
    "annotate/<int:assignment_id>/skip/": ((302, 405, 405, 405, 405), (302, 422, 404, 404, 404)),
    # showing the hints of the run being coded: coder1 submitted it, so the default policy lets them (302 back
    # to the page, the panel shown); someone else's coding is never confirmed (404)
    "annotate/<int:assignment_id>/hints/": ((302, 405, 405, 405, 405), (302, 302, 404, 404, 404)),
    "annotate/discussions/": ((302, 200, 200, 200, 200), (302, 405, 405, 405, 405)),
    "annotate/discussions/<int:discussion_id>/": ((302, 200, 404, 200, 200), (302, 405, 405, 405, 405)),
    # an empty comment is refused beside the form (422)
    "annotate/discussions/<int:discussion_id>/comment/": ((302, 405, 405, 405, 405), (302, 422, 404, 422, 422)),
    "annotate/discussions/<int:discussion_id>/resolve/": ((302, 405, 405, 405, 405), (302, 302, 404, 302, 302)),
    # the adjudicator's queue: an annotator is refused, not shown an empty queue
    "annotate/adjudication/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
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
    # no bundle has been built here: the lead is told so (409)
    "annotate/studies/<int:study_id>/bundle.zip": ((302, 403, 403, 409, 409), (302, 405, 405, 405, 405)),
    # asking the worker for a bundle: a redirect back to the dashboard, for the lead only
    "annotate/studies/<int:study_id>/bundle/build/": ((302, 405, 405, 405, 405), (302, 403, 403, 302, 302)),
    "annotate/studies/<int:study_id>/bundle/status/": ((302, 403, 403, 200, 200), (302, 405, 405, 405, 405)),
    # every export kind alike (the crawl opens each): the study's lead only
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
    # a frozen codebook (the crawl's) is not edited: GET goes to its page, a POST is refused as a conflict (409)
    "codebooks/<int:codebook_id>/edit/": ((302, 403, 403, 403, 302), (302, 403, 403, 403, 409)),
    "api/runs/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
    "api/runs/<int:pk>/": ((401, 200, 404, 200, 200), (401, 405, 405, 405, 405)),
    "api/runs/<int:pk>/events/": ((401, 200, 404, 200, 200), (401, 405, 405, 405, 405)),
    "api/imports/": ((401, 405, 405, 405, 405), (401, 403, 403, 403, 400)),
    "api/imports/<int:pk>/": ((401, 403, 403, 403, 200), (401, 405, 405, 405, 405)),
    "api/codebooks/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
    "api/codebooks/<int:pk>/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
    "api/assignments/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
    "api/annotations/<int:assignment_id>/": ((401, 200, 404, 404, 404), (401, 405, 405, 405, 405)),
    "api/annotations/<int:assignment_id>/submit/": ((401, 405, 405, 405, 405), (401, 400, 404, 404, 404)),
    "api/studies/<int:study_id>/exports/<slug:kind>/": ((401, 403, 403, 200, 200), (401, 405, 405, 405, 405)),
    "api/schema/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
    "api/docs/": ((401, 200, 200, 200, 200), (401, 405, 405, 405, 405)),
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


# -- the world the crawl visits --------------------------------------------------------------------------


def db_state() -> dict[str, tuple]:
    """Row count and a checksum of every table's ids and update times."""
    state = {}
    for model in apps.get_models():
        rows = model.objects.all()
        stamp = "updated_at" if any(f.name == "updated_at" for f in model._meta.fields) else "pk"
        state[model._meta.label] = (rows.count(), tuple(rows.order_by("pk").values_list("pk", stamp)))
    return state


def changed_tables(before: dict, after: dict) -> set[str]:
    return {
        label for label in before if before[label] != after[label] and not label.startswith(("sessions.", "admin."))
    }


WRITE = re.compile(r'^\s*(INSERT|UPDATE|DELETE|REPLACE|COPY|TRUNCATE)\b(?!.*"django_session")', re.I | re.S)


class Crawl:
    """Sends the crawl's requests and checks what every response shows."""

    def __init__(self, users: dict):
        self.users = users  # role -> user (None: anonymous); "own" and "other" are both coder1
        self.pages = {role: (client_for(user) if user else Client()) for role, user in users.items()}
        self.apis = {}
        for role, user in users.items():
            self.apis[role] = APIClient()
            if user:
                self.apis[role].force_authenticate(user)
        self.requests = 0

    def send(self, method: str, url: str, role: str, client, **extra):
        """One request; no write but to the session table if it is a GET, and whatever it shows checked."""
        with CaptureQueriesContext(connection) as queries:
            response = getattr(client, method)(url, **extra)
            body = b"".join(response.streaming_content) if response.streaming else response.content
        self.requests += 1
        who = f"{method.upper()} {url} as {role}"
        if method == "get":
            writes = [q["sql"][:200] for q in queries if WRITE.match(q["sql"])]
            assert not writes, f"{who} wrote: {writes}"
        if role in ("anon", "own", "other"):
            assert SECRET.encode() not in body, f"{who} leaks coder2's labels"
        if response.status_code == 200 and response.get("Content-Type", "").startswith("text/html"):
            text = body.decode()
            # A file's or an event's text is data, shown in <pre> as written: a JSON log line may hold "}}".
            markup = re.sub(r"<pre>.*?</pre>", "", text, flags=re.DOTALL)
            leaked = [mark for mark in ("{#", "#}", "{%", "%}", "{{", "}}") if mark in markup]
            assert not leaked, f"{who} shows template text {leaked}"
            nones = re.findall(r".{0,40}\bNone\b.{0,40}", visible_text(text))
            assert not nones, f"{who} shows a literal None: {nones}"
            title = re.search(r"<title>(.*?)</title>", text, re.S)  # a page, not a fragment
            if title:
                assert "<" not in title[1] and title[1].strip(), f"{who} has the title {title[1]!r}"
        return response

    def get(self, route: str, url: str, role: str) -> int:
        """GET as the role's client (the API's for api/ routes) and, for coder1, once more as htmx does."""
        client = self.apis[role] if route.startswith("api/") else self.pages[role]
        status = self.send("get", url, role, client).status_code
        if role in ("own", "other"):
            self.send("get", url, role, self.pages[role], HTTP_HX_REQUEST="true")
        return status


def _crawl_world(study, codebook, trio, adjudicator, admin_user):
    ids = route_world(study, codebook, trio)
    users = {"anon": None, "own": trio[0], "other": trio[0], "adjudicator": adjudicator, "admin": admin_user}
    return ids, users


def _classified(observed: dict[str, tuple[int, ...]], row: int, method: str) -> None:
    """Every route's statuses are EXPECTED's (row 0: GET, row 1: POST); a route not there is to be classified."""
    unclassified = sorted(set(observed) - set(EXPECTED))
    assert not unclassified, f"new route(s) to classify in EXPECTED: {unclassified}"
    wrong = {route: (got, EXPECTED[route][row]) for route, got in observed.items() if got != EXPECTED[route][row]}
    assert not wrong, f"{method} route: (observed, expected)\n" + "\n".join(f"{r}: {v}" for r, v in wrong.items())


def test_every_route_for_every_role_on_get(study, codebook, trio, adjudicator, admin_user):
    """GET: the statuses, and what each response shows; as anonymous, the adjudicator and an admin a foreign id
    is what coder1's own is to them; a missing id, or an own id beside a foreign one, is never let through; and no
    GET writes anything."""
    ids, users = _crawl_world(study, codebook, trio, adjudicator, admin_user)
    crawl = Crawl(users)
    observed = {}
    before = db_state()
    for route in routes():
        options = urls(route, ids["own"], ids["foreign"])
        row = []
        for role in ROLES:
            side = "foreign" if role == "other" else "own"
            row.append(crawl.get(route, options[side], role))
            if role in ("anon", "adjudicator", "admin") and options["foreign"] != options["own"]:
                status = crawl.get(route, options["foreign"], role)
                assert status == row[-1], f"GET {options['foreign']} as {role}: {status}, {row[-1]} for coder1's own"
        observed[route] = tuple(row)
        for label, url in options.items():
            if label in ("own", "foreign"):
                continue
            for role in ("own", "adjudicator", "admin"):
                status = crawl.get(route, url, role)
                assert status != 200, f"GET {url} ({label}) as {role}: 200"
        if parameters(route):
            missing = url_for(route, {**{name: MISSING for _, name in parameters(route)}, "kind": "labels"})
            for role in ("own", "admin"):
                status = crawl.get(route, missing, role)
                assert status in (302, 400, 403, 404, 405), f"GET {missing} (no such id) as {role}: {status}"
        if "<slug:kind>" in route:  # every export kind, refused to annotators alike
            for kind in EXPORT_KINDS:
                url = url_for(route, {**ids["own"], "kind": kind})
                got = tuple(crawl.get(route, url, role) for role in ROLES)
                assert got == EXPECTED[route][0], f"GET {url}: {got}, expected {EXPECTED[route][0]}"
    assert not changed_tables(before, db_state()), f"GET changed {changed_tables(before, db_state())}"
    _classified(observed, 0, "GET")
    assert crawl.requests > 900


def test_no_unsafe_method_goes_through_without_a_csrf_token(study, codebook, trio, adjudicator, admin_user):
    """POST, PUT, PATCH and DELETE without a CSRF token, on every route as every role: refused, nothing changes."""
    ids, users = _crawl_world(study, codebook, trio, adjudicator, admin_user)
    crawl = Crawl(users)
    refusers = {}
    for role, user in users.items():
        refusers[role] = Client(enforce_csrf_checks=True)
        if user:
            refusers[role].force_login(user)
    before = db_state()
    for route in routes():
        options = urls(route, ids["own"], ids["foreign"])
        for role in ROLES:
            url = options["foreign" if role == "other" else "own"]
            for method in ("post", "put", "patch", "delete"):
                response = crawl.send(method, url, role, refusers[role], data={"text": "x", "version": 1})
                refused = (302, 401, 403, 404, 405) if role == "anon" else (403, 404, 405)  # anonymous: to log in
                assert response.status_code in refused, (
                    f"{method.upper()} {url} as {role} without a CSRF token: {response.status_code}"
                )
    changed = changed_tables(before, db_state())
    assert not changed, f"unsafe requests without a CSRF token changed {changed}"


def test_every_route_for_every_role_on_post(study, codebook, trio, adjudicator, admin_user):
    """POST with a token: who is let in (fresh sessions after POST /logout/, which ends them)."""
    ids, users = _crawl_world(study, codebook, trio, adjudicator, admin_user)
    observed = {}
    posting = Crawl(users)
    for route in routes():
        options = urls(route, ids["own"], ids["foreign"])
        row = []
        for role in ROLES:
            client = posting.apis[role] if route.startswith("api/") else posting.pages[role]
            url = options["foreign" if role == "other" else "own"]
            row.append(posting.send("post", url, role, client, data={}).status_code)
        observed[route] = tuple(row)
        if route == "accounts/logout/":  # every session it was sent in has ended
            posting = Crawl(users)
    _classified(observed, 1, "POST")


@pytest.mark.parametrize("path", ["/api/runs/?task=a%00b", "/?agent=%00"])
def test_a_nul_in_the_query_string_is_a_400_naming_the_parameter(admin_user, path):
    """Found by schemathesis on PostgreSQL (text cannot hold NUL): it was a 500."""
    response = client_for(admin_user).get(path)
    assert response.status_code == 400
    assert ("'task'" if "task" in path else "'agent'") in response.content.decode()
