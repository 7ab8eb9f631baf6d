"""Several episodes (instances) of one mode in one run: the study counts 804 instances on 650 runs.
A coding and a final coding hold each episode as its own label with every field; codings agree when
their modes and each mode's episode count agree (else they are discussed, and the adjudicator rules the
count); Table 3 counts only agreed or ruled episodes (docs/agreement.md)."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from activity.models import ActivityEntry
from annotation.analysis import compute
from annotation.analysis.inputs import independent_codings, read_inputs
from annotation.annotation_md import parse_annotation_md
from annotation.errors import AnnotationError
from annotation.models import MAX_INSTANCES, Annotation, Discussion, FinalCoding, FinalLabel, Label
from annotation.published_files import PublishedPair
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import LabelInput, annotation_revise, annotation_save, annotation_submit
from annotation.services.published import published_import
from tests.factories import HTMX, PUBLISHED_SAMPLE, both, cite, client_for, mode_code

pytestmark = pytest.mark.django_db


def coded(assignment, episodes: list[tuple], *, submit: bool = True) -> Annotation:
    """Save (and submit) a coding: episodes are (code, rationale) in order."""
    annotation = annotation_for(assignment=assignment)
    run = assignment.run
    labels = [
        LabelInput(code_id=code.pk, rationale=why, evidence=[cite(run, code.key)], episode_id=f"ep-{n}")
        for n, (code, why) in enumerate(episodes, start=1)
    ]
    annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                    no_failure=not episodes, notes="", labels=labels)  # fmt: skip
    if submit:
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    return annotation


def test_a_coding_holds_several_episodes_of_a_mode_each_with_its_fields(study, codebook):
    a, _ = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    annotation = coded(a, [(lossy, "first handoff"), (stale, "stale"), (lossy, "second handoff")], submit=False)
    rows = sorted(annotation.labels.values_list("code__key", "instance", "rationale", "episode_id"))
    assert rows == [
        ("lossy-handoff", 1, "first handoff", "ep-1"),
        ("lossy-handoff", 2, "second handoff", "ep-3"),
        ("stale-handoff", 1, "stale", "ep-2"),
    ]
    snapshot = annotation.history.last().after["labels"]
    assert [(s["code"], s["instance"]) for s in snapshot].count(("lossy-handoff", 2)) == 1


def test_submit_names_the_episode_that_lacks_a_rationale(study, codebook):
    a, _ = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    annotation = coded(a, [(lossy, "first"), (lossy, "  ")], submit=False)
    with pytest.raises(AnnotationError, match=r"'Lossy Handoff \(episode 2\)' needs a rationale") as refused:
        annotation_submit(annotation=annotation, actor=a.annotator, version=annotation.version)
    assert set(refused.value.errors) == {f"rationale-{lossy.pk}-2"}


def test_the_database_refuses_a_duplicate_episode_or_episode_zero(study, codebook):
    a, _ = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    annotation = coded(a, [(lossy, "one")], submit=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        Label.objects.create(annotation=annotation, code=lossy, instance=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Label.objects.create(annotation=annotation, code=lossy, instance=0)


def test_too_many_episodes_are_refused_and_nothing_is_written(study, codebook):
    a, _ = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    with pytest.raises(AnnotationError, match=f"more than {MAX_INSTANCES} episodes"):
        coded(a, [(lossy, "x")] * (MAX_INSTANCES + 1), submit=False)
    assert not Annotation.objects.filter(assignment=a).exists()


def test_the_annotate_form_adds_and_reads_episodes(study, codebook):
    a, _ = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    client = client_for(a.annotator)
    data = {
        "version": 1, "code": [lossy.pk], "notes": "",
        f"instance-{lossy.pk}": ["1", "2"],
        f"rationale-{lossy.pk}": "first", f"rationale-{lossy.pk}-2": "second",
        f"episode-{lossy.pk}-2": "ep-b", f"consequence-{lossy.pk}-2": "lost the name",
    }  # fmt: skip
    assert client.post(f"/annotate/{a.pk}/save/", data, **HTMX).status_code == 200
    labels = list(Annotation.objects.get(assignment=a).labels.order_by("instance"))
    assert [(x.instance, x.rationale, x.episode_id) for x in labels] == [(1, "first", ""), (2, "second", "ep-b")]
    assert labels[1].realized_consequence == "lost the name"
    page = client.get(f"/annotate/{a.pk}/").content.decode()
    assert f'name="rationale-{lossy.pk}-2"' in page and "second</textarea>" in page
    # an episode number out of range is refused by name, and nothing changes
    bad = {**data, "version": 2, f"instance-{lossy.pk}": ["1", "0"]}
    response = client.post(f"/annotate/{a.pk}/save/", bad, **HTMX)
    assert response.status_code == 422 and f"instance-{lossy.pk}" in response.content.decode()
    assert Annotation.objects.get(assignment=a).labels.count() == 2


def test_the_api_takes_a_repeated_mode_as_its_next_episode(study, codebook):
    a, _ = both(study)
    api = APIClient()
    api.force_authenticate(a.annotator)
    payload = {
        "version": 1, "no_failure": False, "notes": "",
        "labels": [{"code": "lossy-handoff", "rationale": "one"}, {"code": "lossy-handoff", "rationale": "two"}],
    }  # fmt: skip
    response = api.put(f"/api/annotations/{a.pk}/", payload, format="json")
    assert response.status_code == 200, response.content
    assert [(x["instance"], x["rationale"]) for x in response.json()["labels"]] == [(1, "one"), (2, "two")]


def test_codings_that_count_a_modes_episodes_differently_are_discussed(study, codebook):
    a, b = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    coded(a, [(lossy, "A first"), (lossy, "A second")])
    coded(b, [(lossy, "B only")])
    # The same modes, not the same count of the unit Table 3 adds up: no final label until they agree.
    assert not FinalCoding.objects.filter(run=a.run).exists()
    discussion = Discussion.objects.get(run=a.run)
    assert discussion.agreement == 1.0  # the mode sets agree: it sorts after every mode disagreement
    said = ActivityEntry.objects.get(action="discussion.open", run_id=a.run_id).summary
    assert "agree on lossy-handoff but not on episode counts (lossy-handoff 2 / 1)" in said
    with pytest.raises(AnnotationError, match=r"differ on episode counts \(lossy-handoff 2 / 1\)"):
        flow.discussion_consensus(discussion=discussion, actor=a.annotator)
    page = client_for(a.annotator).get(f"/annotate/discussions/{discussion.pk}/").content.decode()
    assert "episode counts differ: 2 / 1" in page and "Resolved by consensus</button>" in page
    assert 'value="consensus" disabled' in page
    # B finds the second episode: the counts agree and consensus records both episodes.
    annotation = annotation_for(assignment=b)
    flow_labels = [
        LabelInput(code_id=lossy.pk, rationale=why, evidence=[cite(b.run, lossy.key)]) for why in ("B", "B2")
    ]
    annotation_revise(discussion=discussion, annotation=annotation, actor=b.annotator, version=annotation.version,
                      no_failure=False, notes="", labels=flow_labels)  # fmt: skip
    final = flow.discussion_consensus(discussion=discussion, actor=a.annotator)
    assert sorted(final.labels.values_list("instance", flat=True)) == [1, 2]
    # Agreement is computed on the independent codings, counts included.
    _, codings, _ = independent_codings(study=study)
    mine = {c.annotator: c.episodes("lossy-handoff") for c in codings if c.item == str(a.run_id)}
    assert mine == {a.annotator.username: 2, b.annotator.username: 1}


def test_the_adjudicator_rules_how_many_episodes_when_the_annotators_differ(study, codebook, adjudicator):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    coded(a, [(lossy, "one"), (lossy, "two")])
    coded(b, [(lossy, "B"), (stale, "s")])
    discussion = Discussion.objects.get(run=a.run)
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    with pytest.raises(AnnotationError, match=r"counted 1 / 2 episodes; say how many") as refused:
        flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "r")])
    assert set(refused.value.errors) == {f"episodes-{lossy.pk}"}
    for bad in (0, MAX_INSTANCES + 1):
        with pytest.raises(AnnotationError, match="episodes must be between 1 and"):
            flow.adjudicate(
                discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "r", episodes=bad)]
            )
    assert not FinalCoding.objects.filter(run=a.run).exists()
    # Ruled: three episodes of lossy (the third has only the ruling's rationale), stale as B counted it.
    rulings = [flow.Ruling(lossy.pk, "ruled", episodes=3), flow.Ruling(stale.pk, "also")]
    final = flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=rulings)
    rows = sorted(final.labels.values_list("code__key", "instance", "episode_id"))
    assert rows == [("lossy-handoff", 1, "ep-1"), ("lossy-handoff", 2, "ep-2"), ("lossy-handoff", 3, ""),
                    ("stale-handoff", 1, "ep-2")]  # fmt: skip
    logged = ActivityEntry.objects.get(action="final.adjudicated", run_id=a.run_id).detail["rulings"]
    assert [(r["mode"], r["episodes"]) for r in logged] == [("lossy-handoff", 3), ("stale-handoff", 1)]


def test_the_ruling_form_starts_from_the_agreed_count_and_asks_when_they_differ(study, codebook, adjudicator):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    coded(a, [(lossy, "one"), (lossy, "two"), (stale, "s")])
    coded(b, [(lossy, "B"), (stale, "s")])
    discussion = Discussion.objects.get(run=a.run)
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    client = client_for(adjudicator)
    url = f"/annotate/adjudication/{discussion.pk}/"
    page = client.get(url).content.decode()
    assert f'name="episodes-{stale.pk}" min="1" max="{MAX_INSTANCES}" value="1"' in page
    assert f'name="episodes-{lossy.pk}" min="1" max="{MAX_INSTANCES}" value=""' in page
    assert "the annotators counted 1 / 2: say how many" in page
    posted = {"code": [lossy.pk], f"rationale-{lossy.pk}": "r", f"episodes-{lossy.pk}": ""}
    refused = client.post(url, posted)
    assert refused.status_code == 422 and "counted 1 / 2 episodes; say how many" in refused.content.decode()
    assert client.post(url, {**posted, f"episodes-{lossy.pk}": "two"}).status_code == 422
    assert client.post(url, {**posted, f"episodes-{lossy.pk}": "2"}).status_code == 302
    assert FinalLabel.objects.filter(final__run=a.run, code=lossy).count() == 2


def test_adjudication_keeps_the_recorded_episodes_of_a_ruled_mode(study, codebook, adjudicator):
    a, b = both(study)
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    coded(a, [(lossy, "one"), (lossy, "two")])
    coded(b, [(stale, "other")])
    discussion = Discussion.objects.get(run=a.run)
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    with pytest.raises(AnnotationError, match="ruled twice"):
        flow.adjudicate(discussion=discussion, actor=adjudicator,
                        rulings=[flow.Ruling(lossy.pk, "x"), flow.Ruling(lossy.pk, "y")])  # fmt: skip
    final = flow.adjudicate(discussion=discussion, actor=adjudicator,
                            rulings=[flow.Ruling(lossy.pk, "ruled"), flow.Ruling(stale.pk, "also")])  # fmt: skip
    rows = sorted(final.labels.values_list("code__key", "instance", "rationale", "episode_id"))
    assert rows == [("lossy-handoff", 1, "ruled", "ep-1"), ("lossy-handoff", 2, "ruled", "ep-2"),
                    ("stale-handoff", 1, "also", "ep-1")]  # fmt: skip


def test_table3_counts_episodes_and_runs_separately(study, codebook):
    """docs/agreement.md: an instance is one episode of a mode on a run (one final label); a mode's
    count is its instances; runs_with_mode counts runs."""
    lossy, stale = mode_code(codebook, "lossy-handoff"), mode_code(codebook, "stale-handoff")
    first, second = study.runs.order_by("pk")[:2]
    for assignment in both(study, first):
        coded(assignment, [(lossy, "one"), (lossy, "two"), (stale, "s")])
    for assignment in both(study, second):
        coded(assignment, [(lossy, "once")])
    table = compute.table3(read_inputs(study, parts=("table3",)))
    rows = {(r["level"], r["key"]): r for r in table["rows"]}
    assert (table["instances"], table["runs_with_mode"]) == (4, 2)
    assert rows[("mode", "lossy-handoff")]["count"] == 3 and rows[("mode", "stale-handoff")]["count"] == 1
    assert rows[("mode", "lossy-handoff")]["percent"] == pytest.approx(75.0)


def test_published_episodes_are_gold_instances_and_round_trip(dictdb_study, tmp_path):
    text = PUBLISHED_SAMPLE.read_text()
    block = text[text.index("## Failure 1") :]
    second = block.replace("## Failure 1", "## Failure 2").replace("episode_id: ", "episode_id: second-", 1)
    record = parse_annotation_md(text + "\n" + second, name="two/annotation.md")
    [result] = published_import(study=dictdb_study, pairs=[PublishedPair(record=record)])
    assert result.imported == ["Final-Tree Overwrite", "Final-Tree Overwrite (episode 2)"]
    labels = list(FinalLabel.objects.filter(final__study=dictdb_study).order_by("instance"))
    assert [x.instance for x in labels] == [1, 2] and labels[1].episode_id.startswith("second-")
    assert compute.table3(read_inputs(dictdb_study, parts=("table3",)))["instances"] == 2

    call_command("export_published", str(dictdb_study.pk), "--out", str(tmp_path / "out"), stdout=io.StringIO())
    (written,) = (tmp_path / "out").rglob("annotation.md")
    again = parse_annotation_md(written.read_text(), name="again.md")
    assert [f.fields for f in again.failures] == [f.fields for f in record.failures]


def test_a_final_from_before_counts_were_compared_counts_only_the_agreed_episodes(study, codebook, adjudicator):
    """Migration 0020: a final coding that kept the larger of two episode counts keeps its rows, the
    episodes beyond the count both coders gave marked count_agreed = False; Table 3 leaves them out."""
    import importlib

    from django.apps import apps

    from annotation.analysis.store import analysis_refresh
    from annotation.selectors.review import run_annotations

    migration = importlib.import_module("annotation.migrations.0020_final_label_count_agreed")
    lossy = mode_code(codebook, "lossy-handoff")
    first, second = study.runs.order_by("pk")[:2]
    a, b = both(study, first)
    coded(a, [(lossy, "A1"), (lossy, "A2")])
    coded(b, [(lossy, "B1")])
    for assignment in both(study, second):  # agreed on two episodes: nothing to mark
        coded(assignment, [(lossy, "one"), (lossy, "two")])
    # The final as the rule before made it: the same modes agree, the larger count kept.
    Discussion.objects.filter(run=first).delete()
    legacy = flow.final_from_annotations(study=study, run_id=first.pk, provenance="agreed",
                                         annotations=run_annotations(study=study, run_id=first.pk))  # fmt: skip
    migration.mark_unagreed_episodes(apps, None)
    assert list(legacy.labels.order_by("instance").values_list("instance", "count_agreed")) == [(1, True), (2, False)]
    assert set(FinalLabel.objects.filter(final__run=second).values_list("count_agreed", flat=True)) == {True}
    table = compute.table3(read_inputs(study, parts=("table3",)))
    assert (table["instances"], table["instances_not_agreed"], table["runs_final"]) == (3, 1, 2)
    analysis_refresh(study_id=study.pk)
    page = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/").content.decode()
    assert "1 final episode not counted" in page
    export = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/export/finals.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert sorted(r["count_agreed"] for r in rows if r["run_id"] == str(first.pk)) == ["False", "True"]
