"""Every HTML form and htmx POST the route list knows, sent with bad input — NUL bytes, lone surrogates,
over-long text, huge and negative numbers — and the API's JSON bodies nested 100,000 deep: none may answer 5xx
(run it on PostgreSQL, whose text cannot hold a NUL). The API's other inputs are schemathesis's
(tests/test_api_schemathesis.py).

The forms are the ones the pages render: every page of the crawl's world (tests/factories.route_world) is opened as
coder1, the adjudicator and an admin, each `<form method=post>` and `hx-post` read with its fields, and each field
that takes text or a number sent with each bad value while the others keep what the page gave them. A POST route
no page offers a form for is still sent every field name any page knows. A test fails naming a route that was
sent nothing."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import quote, urlsplit

import pytest
from django.urls import Resolver404, resolve
from rest_framework.test import APIClient

from annotation.models import Annotation, Comment, Discussion, Label
from annotation.services.review import discussion_escalate
from taxonomy.services import codebook_new_version
from tests.factories import (
    HTMX,
    client_for,
    coding_form,
    mine,
    mode_code,
    route_world,
    shared_run_assignments,
    submit_disagreement,
)
from tests.routes import routes, urls

pytestmark = pytest.mark.django_db

BAD_TEXT = {
    "nul": "a\x00b",
    "surrogate": "a\ud800b",
    "long": "x" * 250,  # over every name's 200
    "very long": "y" * 200_001,  # over every free text's limit
}
BAD_NUMBER = {"huge": "9223372036854775808", "negative": "-1", "float": "1e309", "nul number": "1\x00"}
ONE_BY_ONE = ("nul", "surrogate", "very long", "huge")  # each field alone; the others go in every field at once
TEXT_TYPES = {"text", "textarea", "hidden", "number", "search", "email", "url", "", None}
SKIP = {"accounts/logout/", "accounts/login/", "admin/login/"}  # sessions, not data


class _Forms(HTMLParser):
    """The page's POST forms: (action, fields, htmx); a field is (name, type, value, checked). A field outside its
    form (`form="id"`) is counted in that form's."""

    def __init__(self, page_url: str):
        super().__init__()
        self.page_url = page_url
        self.forms: list[tuple[str, list, bool]] = []
        self.by_id: dict[str, list] = {}
        self.elsewhere: list[tuple[str, tuple]] = []  # (form id, field)
        self.current: list | None = None
        self.select: tuple[str, list] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            hx = a.get("hx-post")
            if (a.get("method") or "").lower() == "post" or hx:
                self.current = []
                self.forms.append((hx or a.get("action") or self.page_url, self.current, bool(hx)))
                if a.get("id"):
                    self.by_id[a["id"]] = self.current
            return
        if tag == "button" and a.get("hx-post") and self.current is None:
            self.forms.append((a["hx-post"], [(a.get("name"), "hidden", a.get("value", ""), True)], True))
        field = None
        if tag == "input" and a.get("name"):
            kind = (a.get("type") or "text").lower()
            if kind in ("button", "file", "image", "reset"):
                return
            field = (a["name"], kind, a.get("value", ""), "checked" in a or kind == "submit")
        elif tag == "textarea" and a.get("name"):
            field = (a["name"], "textarea", "", True)
        elif tag == "select" and a.get("name"):
            field = (a["name"], "select", None, True)
        elif tag == "option" and self.select:
            name, fields = self.select
            i = next(i for i, f in enumerate(fields) if f[0] == name)
            if fields[i][2] is None:
                fields[i] = (name, "select", a.get("value", ""), True)
        elif tag == "button" and a.get("name"):
            field = (a["name"], "submit", a.get("value", ""), False)
        if field is None:
            return
        if a.get("form"):
            self.elsewhere.append((a["form"], field))
        elif self.current is not None:
            self.current.append(field)
            if tag == "select":
                self.select = (field[0], self.current)

    def handle_endtag(self, tag):
        if tag == "form":
            self.current = None
        elif tag == "select":
            self.select = None

    def close(self):
        super().close()
        for form_id, field in self.elsewhere:
            if form_id in self.by_id:
                self.by_id[form_id].append(field)


def _route_of(url: str) -> str | None:
    try:
        return resolve(urlsplit(url).path).route
    except Resolver404:
        return None


def _encode(pairs: list[tuple[str, str]]) -> bytes:
    """A form body as a browser would send it; a lone surrogate goes as the bytes a broken client sends."""
    return "&".join(
        f"{quote(k.encode('utf-8', 'surrogatepass'))}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in pairs
    ).encode()


def _bodies(fields: list) -> list[tuple[str, list[tuple[str, str]]]]:
    """The form with every text-taking field given each bad value at once, then each field alone given the bad
    values of ONE_BY_ONE (the others as the page gives them); every submit button's name sent once each."""
    base = [(n, v or "") for n, kind, v, checked in fields if kind != "submit" and (checked or kind in TEXT_TYPES)]
    kinds = {}  # one field of each kind: `rationale-12` stands for every code's rationale
    for n, kind, _, _ in fields:
        if n == "csrfmiddlewaretoken":
            continue  # refused by the middleware before any view (the test client does not check it)
        if kind in TEXT_TYPES or kind == "select":
            kinds.setdefault(n.rstrip("0123456789"), n)
    targets = sorted(kinds.values())
    buttons = [(n, v) for n, kind, v, _ in fields if kind == "submit"] or [None]
    if not targets:  # nothing to put a bad value in: the form once as the page gives it
        return [("as the page gives it", base + ([button] if button else [])) for button in buttons]
    bodies = []
    for label, bad in {**BAD_TEXT, **BAD_NUMBER}.items():
        for button in buttons:
            extra = [button] if button else []
            bodies.append((f"{label}, every field", [(n, bad if n in targets else v) for n, v in base] + extra))
            if label not in ONE_BY_ONE:
                continue
            for target in targets:
                bodies.append((f"{label} in {target}", [(n, bad if n == target else v) for n, v in base] + extra))
    return bodies


def _form_fields(client, page: str, action: str) -> list | None:
    """The fields of the form posting to `action` on `page`, as the page gives them now (a version moves on)."""
    response = client.get(page)
    if response.status_code != 200:
        return None
    parser = _Forms(page)
    parser.feed(response.content.decode())
    parser.close()
    return next((fields for target, fields, _ in parser.forms if target == action), None)


ROLES = ("coder1", "adjudicator", "admin")
REFUSED = (302, 401, 403, 404, 405)  # the role may not post here: the next role is tried


def _world(study, codebook, trio, adjudicator, admin_user):
    """The route world, plus the states whose forms differ: coder1's draft (save, submit, skip), a revision under
    discussion, a codebook draft in the editor, a ruling. Returns (ids, users, page urls)."""
    ids = route_world(study, codebook, trio)
    draft = codebook_new_version(codebook=codebook, change_log="fuzz", user=admin_user)
    users = dict(zip(ROLES, (trio[0], adjudicator, admin_user), strict=True))
    page_urls = [
        urls(route, ids["own"], ids["foreign"])["own"]
        for route in routes()
        if not route.startswith("api/") and route not in SKIP
    ]
    me = trio[0]
    drafts = mine(study, me).exclude(run_id__in=Discussion.objects.values("run_id")).exclude(annotation__isnull=False)
    discussed = mine(study, me).get(run_id=Discussion.objects.get(pk=ids["own"]["discussion_id"]).run_id)
    other = drafts.exclude(pk=drafts.first().pk).filter(run__assignments__annotator=trio[2]).first()
    escalated = submit_disagreement(study, other.run_id, codebook)
    discussion_escalate(discussion=escalated, actor=me)
    page_urls += [f"/annotate/{drafts.first().pk}/", f"/annotate/{discussed.pk}/", f"/codebooks/{draft.pk}/edit/"]
    page_urls.append(f"/annotate/adjudication/{escalated.pk}/")
    return ids, users, page_urls


def _offered_forms(users, page_urls) -> tuple[dict[str, list], set[str]]:
    """Every POST form the pages render to each role, one of each shape (the editor's form for one code stands for
    every code's), given to the first role (in ROLES order) whose pages offer it: route -> [(role, page, action,
    htmx)]; and every field name any page knows."""
    forms: dict[str, list] = {}
    names: set[str] = set()
    shapes = set()
    for role, user in users.items():
        client = client_for(user)
        for url in page_urls:
            response = client.get(url)
            if response.status_code != 200 or not response.get("Content-Type", "").startswith("text/html"):
                continue
            parser = _Forms(url)
            parser.feed(response.content.decode())
            parser.close()
            for action, fields, htmx in parser.forms:
                route = _route_of(action)
                if route is None or route in SKIP:
                    continue
                names_ = tuple(sorted({n.rstrip("0123456789") for n, *_ in fields if n}))
                ops = tuple(sorted(v for n, kind, v, _ in fields if kind == "hidden" and n in ("op", "action")))
                shape = (route, names_, ops)
                names.update(name for name, *_ in fields if name)
                if shape in shapes:
                    continue
                shapes.add(shape)
                forms.setdefault(route, []).append((role, url, action, htmx))
    # what ends a state (a freeze, a submission, a ruling) is sent last
    last = ("freeze", "new-version", "promote", "submit", "skip", "resolve", "adjudication/")
    return dict(sorted(forms.items(), key=lambda item: any(word in item[0] for word in last))), names


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.django_db(transaction=True)  # a request's database error is its own, as in production
def test_no_form_answers_a_server_error_to_bad_input(study, codebook, trio, adjudicator, admin_user, role):
    """Each form shape is sent its bad values by one role, the first whose pages offer it (a form two roles see is
    the same code path); each role's share runs in a world of its own. A POST route no page offers a form for goes
    to the last role: every field name any page knows, as the first role allowed to post there."""
    ids, users, page_urls = _world(study, codebook, trio, adjudicator, admin_user)
    forms, names = _offered_forms(users, page_urls)
    failures, sent = [], set()
    client = client_for(users[role])
    client.raise_request_exception = False  # a 500 is reported with the others
    for route, found in forms.items():
        for who, page, action, htmx in found:
            if who != role:
                continue
            bodies = _bodies(_form_fields(client, page, action) or [])
            i = -1
            while (i := i + 1) < len(bodies):
                label, pairs = bodies[i]
                extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
                response = client.post(
                    action, _encode(pairs), content_type="application/x-www-form-urlencoded", **extra
                )
                sent.add(route)
                if response.status_code >= 500:
                    failures.append(f"POST {action} as {role} ({label}): {response.status_code}")
                elif response.status_code < 400:  # it went through: the form as the page now gives it
                    bodies[i + 1 :] = _bodies(_form_fields(client, page, action) or [])[i + 1 :]
    if role == ROLES[-1]:
        for route in routes():
            if route.startswith("api/") or route in SKIP or route in forms:
                continue
            url = urls(route, ids["own"], ids["foreign"])["own"]
            failures += _post_every_known_field(users, url, names)
            sent.add(route)
    assert not failures, "\n".join(failures)
    mine_ = {route for route, found in forms.items() if any(who == role for who, *_ in found)}
    assert mine_ and mine_ <= sent, f"{role} sent nothing to {sorted(mine_ - sent)}"
    must = {"annotate/discussions/<int:discussion_id>/comment/", "annotate/<int:assignment_id>/save/",
            "annotate/<int:assignment_id>/skip/", "codebooks/<int:codebook_id>/edit/"}  # fmt: skip
    assert must <= set(forms), f"no page offered a form for {sorted(must - set(forms))}"


def _post_every_known_field(users, url: str, names: set[str]) -> list[str]:
    """Every bad value in every known field, as the first role the route lets post (a GET-only route: nothing)."""
    failures = []
    for role, user in users.items():
        client = client_for(user)
        client.raise_request_exception = False
        for n, (label, bad) in enumerate({**BAD_TEXT, **BAD_NUMBER}.items()):
            pairs = [(name, bad) for name in sorted(names)]
            response = client.post(url, _encode(pairs), content_type="application/x-www-form-urlencoded")
            if response.status_code >= 500:
                failures.append(f"POST {url} as {role} ({label}, every known field): {response.status_code}")
            if response.status_code == 405:
                return failures  # not a POST route
            if n == 0 and response.status_code in REFUSED:
                break  # this role may not post here: the next one
        else:
            return failures
    return failures


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("suffix", ["", "submit/"])
def test_deeply_nested_json_on_the_api_is_a_400(study, trio, suffix):
    assignment = mine(study, trio[0]).first()
    client = APIClient()
    client.force_authenticate(trio[0])
    method = client.post if suffix else client.put
    response = method(f"/api/annotations/{assignment.pk}/{suffix}", DEEP, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert b"nested" in response.content


@pytest.mark.parametrize("offset", ["9223372036854775808", "-1", "1e3", "\u0661"])
def test_an_offset_out_of_range_on_the_run_fragments_is_a_400_naming_it(study, trio, offset):
    from trajectories.models import AgentContext

    run = mine(study, trio[0]).first().run
    context = AgentContext.objects.filter(run=run).order_by("pk").first()
    client = client_for(trio[0])
    for url in (f"/trajectories/runs/{run.pk}/contexts/", f"/trajectories/runs/{run.pk}/contexts/{context.pk}/events/"):
        response = client.get(url, {"offset": offset}, **HTMX)
        assert response.status_code == 400, url
        assert "&#x27;offset&#x27; must be a whole number" in response.content.decode()
        assert client.get(url, {"offset": "100"}, **HTMX).status_code == 200


# -- each refusal names its field, stores nothing, and the page states the limit ---------------------------------


def _discussion_of(study, codebook, trio):
    mine_shared, _ = shared_run_assignments(study, trio[0], trio[1])
    return submit_disagreement(study, mine_shared.run_id, codebook)


@pytest.mark.parametrize(("text", "said"), [("a\x00b", "contains a NUL character"), ("z" * 20_001, "at most 20,000")])
def test_a_comment_text_cannot_hold_is_refused_naming_it(study, codebook, trio, text, said):
    discussion = _discussion_of(study, codebook, trio)
    client = client_for(trio[0])
    page = client.get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    assert 'maxlength="20000"' in page and "up to 20,000 characters" in page
    response = client.post(f"/annotate/discussions/{discussion.pk}/comment/", {"text": text})
    assert response.status_code == 422  # refused, said beside the form with the text kept (without the NUL)
    body = response.content.decode()
    assert re.search(f"comment: [^<]*{said}", body) and (text.replace("\x00", "")[:40] in body)
    assert not Comment.objects.filter(discussion=discussion).exists()
    client.post(f"/annotate/discussions/{discussion.pk}/comment/", {"text": "z" * 20_000})
    assert Comment.objects.filter(discussion=discussion).count() == 1  # the limit itself is allowed


@pytest.mark.parametrize(("field", "value"), [("notes", "n\x00"), ("notes", "n" * 20_001), ("rationale", "r\x00")])
def test_a_save_with_text_no_field_can_hold_is_a_422_naming_it(study, codebook, trio, field, value):
    assignment = mine(study, trio[0]).first()
    code = mode_code(codebook, "lossy-handoff")
    form = coding_form(code, 1, **({"notes": value} if field == "notes" else {f"rationale-{code.pk}": value}))
    response = client_for(trio[0]).post(f"/annotate/{assignment.pk}/save/", form, **HTMX)
    assert response.status_code == 422
    assert (f"rationale-{code.pk}" if field == "rationale" else "notes") in response.content.decode()
    assert not Label.objects.filter(annotation__assignment=assignment).exists()


def test_a_skip_reason_with_a_nul_is_a_422_and_the_run_is_not_skipped(study, trio):
    assignment = mine(study, trio[0]).first()
    response = client_for(trio[0]).post(f"/annotate/{assignment.pk}/skip/", {"reason": "why\x00"}, **HTMX)
    assert response.status_code == 422
    assert "reason: contains a NUL character" in response.content.decode()
    assert not Annotation.objects.filter(assignment=assignment).exclude(skip_reason="").exists()


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("name", "N" * 201, "at most 200"), ("name", "a\x00", "NUL"), ("definition", "d\x00", "NUL")],
)
def test_the_codebook_editor_refuses_text_a_code_cannot_hold_naming_the_column(
    codebook, admin_user, field, value, said
):
    draft = codebook_new_version(codebook=codebook, change_log="", user=admin_user)
    client = client_for(admin_user)
    page = client.get(f"/codebooks/{draft.pk}/edit/").content.decode()
    assert 'maxlength="200"' in page and "(up to 200 characters)" in page
    category = draft.codes.filter(level="category").first()
    form = {"op": "create", "level": "subcategory", "parent_key": category.key, "name": "Fine", "definition": ""}
    response = client.post(f"/codebooks/{draft.pk}/edit/", {**form, field: value}, **HTMX)
    assert response.status_code == 422
    text = response.content.decode()
    assert f"column &#x27;{field}&#x27;" in text and said in text
    assert not draft.codes.filter(parent=category, name__startswith=value[:1]).exclude(name="Fine").exists()
    assert client.post(f"/codebooks/{draft.pk}/edit/", form, **HTMX).status_code == 200
