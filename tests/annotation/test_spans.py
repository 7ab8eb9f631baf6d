"""A cited span of an event's text ("Cite selection" on the coding page): the evidence keeps the quoted
characters and their offsets in the event's text, checked on the server, carried by the API and the exports,
and highlighted when the evidence is opened. Old anchors without spans keep working."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rest_framework.test import APIClient

from annotation.models import Annotation
from tests.factories import HTMX, both, client_for, coding_form, mode_code
from trajectories.models import Event, Run

pytestmark = pytest.mark.django_db

# Offsets count characters (code points): the accents and the emoji are one each.
TEXT = "Reading naïve 🙂 café logs\nsub-0 wrote src/f0.py twice"


def main_message(run: Run) -> Event:
    """The run's first event (its main agent's message), given a text with characters beyond ASCII."""
    event = Event.objects.select_related("context").get(run=run, context__external_id="main", seq=0)
    event.text = TEXT
    event.save(update_fields=["text"])
    return event


def anchor_of(run: Run, event: Event) -> str:
    """The event's anchor as its "cite" button writes it: the side, the run's log and the event's line."""
    return f"{'parallel' if run.mode == 'concurrent' else 'serial'}/{run.source_name}:{event.source_line}"


def span(run: Run, event: Event, quote: str, *, field: str = "evidence", changes: dict | None = None) -> dict:
    start = TEXT.index(quote)
    return {
        "field": field, "anchor": anchor_of(run, event), "agent": "main", "seq": event.seq,
        "start": start, "end": start + len(quote), "quote": quote, **(changes or {}),
    }  # fmt: skip


def save(assignment, code, spans, version=1, **extra):
    data = coding_form(code, version, **{f"spans-{code.pk}": json.dumps(spans), **extra})
    return client_for(assignment.annotator).post(f"/annotate/{assignment.pk}/save/", data, **HTMX)


def test_a_cited_span_keeps_its_quote_and_offsets_and_its_event_is_evidence(study, codebook):
    a, _ = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    cited = span(a.run, event, "café")
    assert (cited["start"], cited["end"]) == (16, 20)  # code points: "ï" and "🙂" count one each
    response = save(a, code, [cited])
    assert response.status_code == 200, response.content.decode()
    label = Annotation.objects.get(assignment=a).labels.get()
    assert label.spans == [cited]
    assert label.evidence == [anchor_of(a.run, event)]  # the span's event is cited as evidence too
    # the page shows it again (a hidden field the script lists), and the coding submits: its anchor resolves
    page = client_for(a.annotator).get(f"/annotate/{a.pk}/").content.decode()
    assert f'name="spans-{code.pk}"' in page and "caf\u00e9" in page
    submitted = client_for(a.annotator).post(f"/annotate/{a.pk}/submit/", coding_form(code, 2, **{
        f"spans-{code.pk}": json.dumps([cited]), f"evidence-{code.pk}": anchor_of(a.run, event)}), **HTMX)  # fmt: skip
    assert submitted.status_code == 200 and Annotation.objects.get(assignment=a).is_submitted


def test_a_span_of_the_sequential_twin_is_contrast(study, codebook):
    a, _ = both(study)
    twin = Run.objects.get(task=a.run.task, agent=a.run.agent, mode="sequential")
    event = main_message(twin)
    code = mode_code(codebook, "lossy-handoff")
    response = save(a, code, [span(twin, event, "src/f0.py", field="contrast")])
    assert response.status_code == 200, response.content.decode()
    label = Annotation.objects.get(assignment=a).labels.get()
    assert label.contrast == [anchor_of(twin, event)] and label.evidence == []
    assert label.spans[0]["quote"] == "src/f0.py" and label.spans[0]["field"] == "contrast"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"quote": "cafe"}, "'span 1.quote': does not equal characters 16–20"),
        ({"end": 999, "quote": "café"}, f"'span 1.end': 999 is past the end of the event's text ({len(TEXT)} "),
        ({"start": 20, "end": 16}, "'span 1.end': must be after start (20)"),
        ({"start": -1}, "'span 1.start': expected a whole number from 0"),
        ({"start": "16"}, "'span 1.start': expected a whole number from 0"),
        ({"seq": 77}, "'span 1.seq': run #"),
        ({"agent": "ghost"}, "has no event 0 of agent 'ghost'"),
        ({"anchor": "elsewhere.jsonl:1"}, "'span 1.anchor': 'elsewhere.jsonl:1' is not the anchor of event 0"),
        ({"field": "notes"}, "'span 1.field': expected evidence or contrast"),
        ({"quote": "caf\x00"}, "'span 1.quote':"),
        ({"quote": "caf\ud800"}, "'span 1.quote':"),
        ({"colour": "red"}, "'span 1.colour': not a key of a span"),
    ],
)
def test_a_span_that_is_not_the_events_characters_is_refused_naming_the_field(study, codebook, change, named):
    a, _ = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    response = save(a, code, [span(a.run, event, "café", changes=change)])
    body = response.content.decode()
    assert response.status_code == 422, body
    assert f"spans-{code.pk}" in body and named.replace("'", "&#x27;") in body
    assert not Annotation.objects.filter(assignment=a, labels__isnull=False).exists()


@pytest.mark.parametrize(("raw", "named"), [("{not json", "not JSON"), ('{"quote": "x"}', "expected a list of spans")])
def test_a_spans_field_that_is_no_list_is_refused(study, codebook, raw, named):
    a, _ = both(study)
    code = mode_code(codebook, "lossy-handoff")
    data = coding_form(code, 1, **{f"spans-{code.pk}": raw})
    response = client_for(a.annotator).post(f"/annotate/{a.pk}/save/", data, **HTMX)
    assert response.status_code == 422 and f"spans-{code.pk}: {named}" in response.content.decode()


def test_no_one_cites_into_a_coding_they_may_not_edit(study, codebook, trio, adjudicator):
    a, b = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    cited = span(a.run, event, "café")
    data = coding_form(code, 1, **{f"spans-{code.pk}": json.dumps([cited])})
    # the other coder of the run, an annotator without the run, and the adjudicator: not their coding
    outsider = next(u for u in trio if u not in (a.annotator, b.annotator))
    for who in (b.annotator, outsider, adjudicator):
        assert client_for(who).post(f"/annotate/{a.pk}/save/", data, **HTMX).status_code == 404
        api = APIClient()
        api.force_authenticate(who)
        payload = {"version": 1, "labels": [{"code": "lossy-handoff", "rationale": "r", "spans": [cited]}]}
        assert api.put(f"/api/annotations/{a.pk}/", payload, format="json").status_code == 404
    assert not Annotation.objects.filter(assignment=a).exists()
    # and once submitted, not even its coder: it is locked
    assert save(a, code, [cited]).status_code == 200
    client_for(a.annotator).post(f"/annotate/{a.pk}/submit/", coding_form(code, 2, **{
        f"evidence-{code.pk}": anchor_of(a.run, event)}), **HTMX)  # fmt: skip
    assert Annotation.objects.get(assignment=a).is_submitted
    later = span(a.run, event, "logs")
    assert save(a, code, [later], version=3).status_code == 409
    assert Annotation.objects.get(assignment=a).labels.get().spans == []


def test_the_api_carries_spans_both_ways_and_checks_them(study, codebook):
    a, _ = both(study)
    event = main_message(a.run)
    api = APIClient()
    api.force_authenticate(a.annotator)
    cited = span(a.run, event, "naïve 🙂")
    payload = {"version": 1, "labels": [{"code": "lossy-handoff", "rationale": "r", "spans": [cited]}]}
    response = api.put(f"/api/annotations/{a.pk}/", payload, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["labels"][0]["spans"] == [cited]
    assert api.get(f"/api/annotations/{a.pk}/").json()["labels"][0]["spans"] == [cited]
    wrong = {
        "version": 2,
        "labels": [{"code": "lossy-handoff", "rationale": "r", "spans": [{**cited, "quote": "naive"}]}],
    }
    refused = api.put(f"/api/annotations/{a.pk}/", wrong, format="json")
    assert refused.status_code == 422 and "'span 1.quote'" in refused.json()["detail"]
    shapeless = {"version": 2, "labels": [{"code": "lossy-handoff", "spans": [{"quote": "x"}]}]}
    assert api.put(f"/api/annotations/{a.pk}/", shapeless, format="json").status_code == 400


def test_the_labels_export_carries_the_spans_and_old_anchors_stay_as_they_were(study, codebook, adjudicator):
    a, b = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    cited = span(a.run, event, "café")
    assert save(a, code, [cited]).status_code == 200
    # a coding from before spans: anchors only
    old = coding_form(code, 1, evidence=anchor_of(a.run, event))
    assert client_for(b.annotator).post(f"/annotate/{b.pk}/save/", old, **HTMX).status_code == 200
    body = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/export/labels.csv")
    body = b"".join(body.streaming_content).decode()
    rows = {r["annotator"]: r for r in csv.DictReader(io.StringIO(body)) if r["run_id"] == str(a.run_id)}
    assert json.loads(rows[a.annotator.username]["spans"]) == [cited]
    assert rows[b.annotator.username]["spans"] == ""
    assert rows[b.annotator.username]["evidence"] == rows[a.annotator.username]["evidence"] == anchor_of(a.run, event)


def test_opening_a_cited_span_highlights_its_characters(study, codebook):
    a, _ = both(study)
    event = main_message(a.run)
    client = client_for(a.annotator)
    mark = f"main:{event.seq}:16:20"
    opened = client.get(
        f"/trajectories/runs/{a.run_id}/anchor/", {"a": anchor_of(a.run, event), "mark": mark}, follow=True
    )
    body = opened.content.decode()
    assert opened.status_code == 200
    assert '<mark class="cited-span" id="cited-span">café</mark>' in body
    assert "Reading naïve 🙂 <mark" in body and "</mark> logs" in body
    # characters the event does not have: said, nothing highlighted
    outside = client.get(
        f"/trajectories/runs/{a.run_id}/anchor/", {"a": anchor_of(a.run, event), "mark": "main:0:40:90"}, follow=True
    )
    assert "Not highlighted: the cited span 40–90 is outside event 0" in outside.content.decode()
    assert "<mark" not in outside.content.decode()


def submit_with(assignment, code, spans):
    event_anchor = spans[0]["anchor"] if spans else ""
    data = coding_form(code, 1, evidence=event_anchor, **{f"spans-{code.pk}": json.dumps(spans)})
    response = client_for(assignment.annotator).post(f"/annotate/{assignment.pk}/submit/", data, **HTMX)
    assert response.status_code == 200, response.content.decode()


def test_agreeing_codings_give_the_final_label_both_coders_spans(study, codebook):
    from annotation.models import FinalCoding

    a, b = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    mine, theirs = span(a.run, event, "café"), span(a.run, event, "logs")
    submit_with(a, code, [mine])
    submit_with(b, code, [theirs])
    final = FinalCoding.objects.get(study=study, run=a.run)
    assert final.labels.get().spans == [mine, theirs]


def test_the_discussion_shows_each_codings_spans_with_a_link_that_highlights_them(study, codebook):
    a, b = both(study)
    event = main_message(a.run)
    submit_with(a, mode_code(codebook, "lossy-handoff"), [span(a.run, event, "café")])
    submit_with(b, mode_code(codebook, "stale-handoff"), [])
    from annotation.models import Discussion

    discussion = Discussion.objects.get(study=study, run=a.run)
    page = client_for(a.annotator).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    assert "<q>café</q>" in page
    assert f"&amp;mark=main:{event.seq}:16:20" in page


def test_the_bundle_carries_the_spans_of_the_codings_and_the_final_labels(study, codebook, tmp_path):
    import zipfile

    from django.core.management import call_command

    a, b = both(study)
    event = main_message(a.run)
    code = mode_code(codebook, "lossy-handoff")
    mine, theirs = span(a.run, event, "café"), span(a.run, event, "logs")
    submit_with(a, code, [mine])
    submit_with(b, code, [theirs])
    bundle = tmp_path / "bundle.zip"
    call_command("export_study", str(study.pk), "--out", str(bundle), stdout=io.StringIO())
    with zipfile.ZipFile(bundle) as z:
        tables = {
            name: list(csv.DictReader(io.StringIO(z.read(f"{name}.csv").decode())))
            for name in ("independent_codings", "current_codings", "final_labels")
        }
    run = str(a.run_id)
    independent = {r["annotator"]: r["spans"] for r in tables["independent_codings"] if r["run_id"] == run}
    assert {who: json.loads(v) for who, v in independent.items()} == {
        a.annotator.username: [mine],
        b.annotator.username: [theirs],
    }
    assert [json.loads(r["spans"]) for r in tables["final_labels"] if r["run_id"] == run] == [[mine, theirs]]
    assert all(r["spans"] == "" for r in tables["final_labels"] if r["run_id"] != run)
