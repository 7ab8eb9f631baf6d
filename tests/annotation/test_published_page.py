"""The run-history page shows what was kept of the study's published records — the header's verdict,
outcome relation and causal scope, its parallel/serial anchors, the review's retained patterns with every
anchor and all candidate decisions with their reasons — to the study's adjudicator and admins only. Every
anchor is a link when it resolves in the imported runs, plain text with the reason when not."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import PublishedRecord
from annotation.selectors.published import published_records_shown
from tests.factories import ARTIFACT_AGENTS as AGENTS
from tests.factories import ARTIFACT_TASK as TASK
from tests.factories import artifact_run_of as run_of
from tests.factories import client_for

pytestmark = pytest.mark.django_db

LINK = re.compile(r'<a href="(/trajectories/runs/\d+/files/\d+/[^"]*)"><code>([^<]+)</code></a>')
UNRESOLVED = re.compile(
    r"<code>([^<]+)</code>\s*<span class=\"small bad\" title=\"[^\"]+\">does not resolve: ([^<]+)</span>"
)


@pytest.fixture
def gold_study(artifact_study, artifact_root):
    call_command("import_published", str(artifact_study.pk), str(artifact_root), "--as-gold", stdout=io.StringIO())
    return artifact_study


def history(study, run) -> str:
    return f"/annotate/studies/{study.pk}/runs/{run.pk}/history/"


def review_anchors(document: dict) -> list[str]:
    """Every evidence and contrast anchor of a review's candidates and retained patterns, as `path:line`."""
    decided = [c for group in document["taxonomy_decisions"] for c in group["candidates"]]
    return [
        f"{a['path']}:{a['line']}"
        for item in (*document["retained_patterns"], *decided)
        for a in (*item["parallel_evidence"], *item["serial_contrast"])
    ]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_page_shows_the_records_fields_and_every_anchor(gold_study, artifact_root, adjudicator, agent):
    run = run_of(gold_study, agent)
    page = client_for(adjudicator).get(history(gold_study, run)).content.decode()
    assert not [mark for mark in ("{#", "#}", "{%", "%}", "{{", "}}") if mark in page]
    text = (artifact_root / TASK / agent / "annotation.md").read_text(encoding="utf-8")
    fields = dict(re.findall(r"^([a-z_]+): (.*)$", text, re.M))
    for key in ("verdict", "outcome_relation", "causal_scope"):
        assert f"<dt>{key}</dt><dd>{fields[key]}</dd>" in page
    document = json.loads((artifact_root / TASK / agent / "review.json").read_bytes())
    expected = review_anchors(document) + [fields["parallel_anchor"].strip("`"), fields["serial_anchor"].strip("`")]
    expected += [
        a for key in ("parallel_evidence", "serial_contrast") for a in re.findall(rf"^{key}: `(.*)`$", text, re.M)
    ]
    links, unresolved = LINK.findall(page), UNRESOLVED.findall(page)
    shown = sorted(anchor for _, anchor in links) + sorted(anchor for anchor, _ in unresolved)
    assert sorted(shown) == sorted(expected)  # each anchor once where it is cited, as a link or with its reason
    assert all(reason.startswith("no file ") for _, reason in unresolved)
    candidates = sum(len(group["candidates"]) for group in document["taxonomy_decisions"])
    assert f"{candidates} candidate decisions" in page and page.count('class="published-decision reject"') == sum(
        c["decision"] == "reject" for group in document["taxonomy_decisions"] for c in group["candidates"]
    )
    for group in document["taxonomy_decisions"]:  # every reason, as published (escaped)
        for candidate in group["candidates"]:
            assert candidate["reason"].replace("'", "&#x27;").replace('"', "&quot;") in page


def test_the_claude_patterns_show_all_their_anchors_and_the_links_open(gold_study, artifact_root, adjudicator):
    run = run_of(gold_study, "claude")
    [_, review] = published_records_shown(study=gold_study, run=run)
    document = json.loads((artifact_root / TASK / "claude" / "review.json").read_bytes())
    for pattern, published in zip(review.patterns, document["retained_patterns"], strict=True):
        assert [a.text for a in pattern.evidence] == [
            f"{a['path']}:{a['line']}" for a in published["parallel_evidence"]
        ]
        assert [a.text for a in pattern.contrast] == [f"{a['path']}:{a['line']}" for a in published["serial_contrast"]]
    client = client_for(adjudicator)
    page = client.get(history(gold_study, run)).content.decode()
    for url, anchor in LINK.findall(page)[:12]:
        opened = client.get(url.replace("&amp;", "&"))
        path = anchor.rsplit(":", 1)[0].split("/", 1)[1]
        assert opened.status_code == 200 and path in opened.content.decode(), anchor


def test_the_page_costs_the_same_queries_however_many_anchors(gold_study, adjudicator):
    """Codex's review cites no anchor, Claude's 32, Kimi's 96: one page, one query count."""
    client = client_for(adjudicator)
    counts = {}
    for agent in AGENTS:
        url = history(gold_study, run_of(gold_study, agent))
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts[agent] = len(queries)
    # 12: session, user, study, run, the three history reads, the records, the twin, each side's files, the groups
    assert len(set(counts.values())) == 1 and max(counts.values()) <= 15, counts


def test_only_the_studys_lead_sees_it(gold_study, trio, adjudicator, admin_user, outsider, client, artifact_root):
    run = run_of(gold_study, "kimi")
    url = history(gold_study, run)
    review = PublishedRecord.objects.get(study=gold_study, run=run, kind="review")
    file_url = f"/annotate/studies/{gold_study.pk}/runs/{run.pk}/published/{review.pk}/"
    for user in (adjudicator, admin_user):
        assert client_for(user).get(url).status_code == 200
        opened = client_for(user).get(file_url)
        assert opened.status_code == 200 and opened["Content-Type"] == "application/json; charset=utf-8"
        assert opened.content == (artifact_root / TASK / "kimi" / "review.json").read_bytes()
    for user in (*trio, outsider):  # the annotators — the run's own coders too — and anyone else
        assert client_for(user).get(url).status_code == 403
        assert client_for(user).get(file_url).status_code == 403
    assert client.get(url).status_code == 302  # anonymous: to the login page
    other_run = run_of(gold_study, "codex")
    lead = client_for(adjudicator)
    assert lead.get(f"/annotate/studies/{gold_study.pk}/runs/{other_run.pk}/published/{review.pk}/").status_code == 404
    assert lead.get(f"/annotate/studies/{gold_study.pk}/runs/{run.pk}/published/999999/").status_code == 404


def test_a_record_kept_before_its_data_shows_as_published(gold_study, adjudicator):
    run = run_of(gold_study, "codex")
    PublishedRecord.objects.create(study=gold_study, run=run, name="old/annotation.md", text="pair_id: old/codex\n")
    page = client_for(adjudicator).get(history(gold_study, run)).content.decode()
    assert "Stored before Parallax kept its data" in page and "pair_id: old/codex" in page
