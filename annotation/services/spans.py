"""Spans of an event's text cited as evidence or contrast (the coding page's "Cite selection"): the
anchor of the event's log line keeps the characters, as Label Studio's span highlighting does.

A span is {"field": "evidence" | "contrast", "anchor", "agent", "seq", "start", "end", "quote"}: the
event is the `seq`-th of agent `agent` (its external id) in the coded run (evidence) or its twin
(contrast); `start` and `end` count the characters (code points) of the event's text, and `quote`
must be exactly text[start:end]. Checked at every save, naming the form field and the span's key."""

from __future__ import annotations

from django.db.models import Q

from common.text import LONG_TEXT, TextError, text_check
from trajectories.models import Event, Run
from trajectories.selectors import event_anchor, run_twin

from .anchors import ANCHOR_MAX, field_key, numbered

SPAN_KEYS = ("field", "anchor", "agent", "seq", "start", "end", "quote")
MAX_SPANS = 100  # spans of one episode


class SpanError(ValueError):
    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def _shape(raw, where: str) -> dict:
    """One span as given (JSON), its keys and types checked; SpanError names `where` and the key."""
    if not isinstance(raw, dict):
        raise SpanError(where, "a span is an object with " + ", ".join(SPAN_KEYS))
    unknown = sorted(set(raw) - set(SPAN_KEYS))
    if unknown:
        raise SpanError(f"{where}.{unknown[0]}", "not a key of a span (" + ", ".join(SPAN_KEYS) + ")")
    for key in SPAN_KEYS:
        if key not in raw:
            raise SpanError(f"{where}.{key}", "missing")
    if raw["field"] not in ("evidence", "contrast"):
        raise SpanError(f"{where}.field", f"expected evidence or contrast, got {raw['field']!r}")
    for key in ("seq", "start", "end"):
        value = raw[key]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 2**31 - 1:
            raise SpanError(f"{where}.{key}", f"expected a whole number from 0, got {value!r}")
    for key, limit in (("anchor", ANCHOR_MAX), ("agent", 255), ("quote", LONG_TEXT)):
        value = raw[key]
        if not isinstance(value, str) or not value:
            raise SpanError(f"{where}.{key}", f"expected a text of 1 to {limit} characters")
        try:
            text_check(value, field=key, max_length=limit)
        except TextError as exc:  # a NUL, a lone surrogate (no database holds them), too long
            raise SpanError(f"{where}.{key}", exc.problem) from exc
    if raw["end"] <= raw["start"]:
        raise SpanError(f"{where}.end", f"must be after start ({raw['start']}), got {raw['end']}")
    return {key: raw[key] for key in SPAN_KEYS}


def span_problems(*, run: Run, labels) -> dict[str, str]:
    """The spans of `labels` (LabelInputs on `run`) that do not cite the characters of an event of
    the pair, by form field (`spans-<code id>[-<instance>]`) with the span's key named: its position
    in the list and the key (`spans-7: span 1 'quote': …`). Two queries at most, however many spans."""
    problems: dict[str, str] = {}
    shaped: list[tuple[str, int, dict]] = []
    for instance, label in numbered(labels):
        key = field_key("spans", label.code_id, instance)
        if len(label.spans) > MAX_SPANS:
            problems[key] = f"at most {MAX_SPANS} spans per episode"
            continue
        for n, raw in enumerate(label.spans, start=1):
            try:
                shaped.append((key, n, _shape(raw, f"span {n}")))
            except SpanError as exc:
                problems.setdefault(key, f"'{exc.key}': {exc.problem}")
    if not shaped:
        return problems
    twin = run_twin(run=run) if any(s["field"] == "contrast" for _, _, s in shaped) else None
    sides = {"evidence": run, "contrast": twin}
    events: dict[tuple[str, str, int], Event] = {}
    for field, side in sides.items():
        wanted = {(s["agent"], s["seq"]) for _, _, s in shaped if s["field"] == field}
        if not wanted or side is None:
            continue
        which = Q()
        for agent, seq in wanted:
            which |= Q(context__external_id=agent, seq=seq)
        for event in Event.objects.filter(which, run=side).select_related("context"):
            events[field, event.context.external_id, event.seq] = event
    for key, n, span in shaped:
        if key in problems:
            continue
        where = f"span {n}"
        side = sides[span["field"]]
        event = events.get((span["field"], span["agent"], span["seq"]))
        if side is None:
            problems[key] = f"'{where}.field': this run has no sequential twin to cite as contrast"
        elif event is None:
            problems[key] = f"'{where}.seq': run #{side.pk} has no event {span['seq']} of agent {span['agent']!r}"
        elif event.source_line is None or span["anchor"] != event_anchor(
            run=side, source_file=event.line_file, line=event.source_line
        ):
            problems[key] = (
                f"'{where}.anchor': {span['anchor']!r} is not the anchor of event {span['seq']} of {span['agent']!r}"
            )
        elif span["end"] > len(event.text):
            problems[key] = (
                f"'{where}.end': {span['end']} is past the end of the event's text ({len(event.text)} characters)"
            )
        elif event.text[span["start"] : span["end"]] != span["quote"]:
            problems[key] = (
                f"'{where}.quote': does not equal characters {span['start']}–{span['end']} of the event's text "
                f"({event.text[span['start'] : span['end']][:80]!r})"
            )
    return problems


def clean_spans(spans: list) -> list[dict]:
    """Checked spans in a stored order: each once, in the order given."""
    seen, out = set(), []
    for span in spans:
        span = {key: span[key] for key in SPAN_KEYS}
        ident = (span["field"], span["agent"], span["seq"], span["start"], span["end"])
        if ident not in seen:
            seen.add(ident)
            out.append(span)
    return out
