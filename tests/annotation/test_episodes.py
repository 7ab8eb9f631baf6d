"""Several episodes (instances) of one mode in one run: the study counts 804 instances on 650 runs.
A coding and a final coding hold each episode as its own label with every field; agreement is on
the modes; Table 3 counts the episodes (docs/agreement.md)."""

from __future__ import annotations

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
from annotation.models import Annotation, Discussion, FinalCoding, FinalLabel, Label
from annotation.published_files import PublishedPair
from annotation.selectors.queue import annotation_for
from annotation.services import review as flow
from annotation.services.coding import MAX_INSTANCES, LabelInput, annotation_save, annotation_submit
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


def test_agreement_is_on_modes_and_the_final_keeps_the_most_episodes(study, codebook):
    a, b = both(study)
    lossy = mode_code(codebook, "lossy-handoff")
    coded(a, [(lossy, "A first"), (lossy, "A second")])
    coded(b, [(lossy, "B only")])
    final = FinalCoding.objects.get(run=a.run)
    assert final.provenance == "agreed"  # the same mode set: no discussion
    first, second = final.labels.order_by("instance")
    assert "A first" in first.rationale and "B only" in first.rationale
    assert second.instance == 2 and "A second" in second.rationale and "B only" not in second.rationale
    said = ActivityEntry.objects.get(action="final.agreed", run_id=a.run_id).summary
    assert "episodes differ: lossy-handoff 2 / 1" in said
    _, codings, _ = independent_codings(study=study)
    assert {c.codes for c in codings if c.item == str(a.run_id)} == {frozenset({"lossy-handoff"})}


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
