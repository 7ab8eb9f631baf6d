"""The study's own annotation.md records, on the real sample."""

from __future__ import annotations

import pytest

from annotation.annotation_md import PublishedFormatError, parse_annotation_md
from annotation.errors import AnnotationError
from annotation.models import Annotation, FinalCoding
from annotation.published_files import PublishedPair
from annotation.services.published import PublishedImportError, published_import
from annotation.services.studies import study_create
from tests.factories import PUBLISHED_SAMPLE, simple_run, write_jsonl
from trajectories.services import import_paths


def load(study, record, folder: str = "", **who):
    """One record loaded on its own (its pair folder as the artifact names it, if given)."""
    [result] = published_import(study=study, pairs=[PublishedPair(record=record, folder=folder)], **who)
    return result


def test_parse_real_sample():
    record = parse_annotation_md(PUBLISHED_SAMPLE.read_text(), name="annotation.md")
    assert record.pair_id == "dictdatabase/codex"
    assert record.header["outcome_relation"] == "parallel_only_pass"
    [failure] = record.failures
    assert failure.labels == ("Shared State and Merge Problems", "Concurrent Writes", "Final-Tree Overwrite")
    assert failure.anchors("parallel_evidence") == [
        "parallel/agent/codex/sessions/2026/08/07/rollout-2026-08-07T07-57-39-019fdb3a-4f79-7012-aeb3-169c9391d9e5"
        ".jsonl:348"
    ]
    assert failure.fields["nearest_rejected_label"] == "Unisolated Workspace Writes"
    assert failure.fields["reasoning"].startswith("The parallel run had live parent")


def test_parse_errors_name_the_line():
    with pytest.raises(PublishedFormatError, match="pair_id"):
        parse_annotation_md("# nothing\n")
    with pytest.raises(PublishedFormatError, match=r"x.md:3: field 'third_label': Failure 1 has none"):
        parse_annotation_md("pair_id: a/codex\n\n## Failure 1\ntop_label: A\nsub_label: B\n", name="x.md")


def test_import_as_an_annotators_submitted_labels(dictdb_study, trio):
    record = parse_annotation_md(PUBLISHED_SAMPLE.read_text(), name="annotation.md")
    result = load(dictdb_study, record, annotator=trio[0])
    assert result.imported == ["Final-Tree Overwrite"] and result.unknown == []
    annotation = Annotation.objects.get(assignment__annotator=trio[0])
    assert annotation.is_submitted
    label = annotation.labels.get()
    assert label.nearest_rejected.name == "Unisolated Workspace Writes"
    assert label.contrast[0].startswith("serial/agent/codex/sessions/")
    assert label.realized_consequence.startswith("A child replaced the shared package tree")
    # The runs here were imported from other logs than the record cites: its anchors are kept as
    # published and reported, each with why it does not resolve.
    assert len(result.unresolved) == 2 and all("no file 'agent/codex/sessions/" in m for m in result.unresolved)


def test_import_as_gold(dictdb_study):
    record = parse_annotation_md(PUBLISHED_SAMPLE.read_text())
    load(dictdb_study, record)
    final = FinalCoding.objects.get()
    assert final.provenance == "imported" and [fl.code.key for fl in final.labels.all()] == ["final-tree-overwrite"]
    label = final.labels.get()
    assert label.evidence[0].startswith("parallel/agent/codex/sessions/")
    # as gold, every field of the failure block is kept
    assert label.contrast[0].startswith("serial/agent/codex/sessions/") and label.provenance == "imported"
    assert label.realized_consequence.startswith("A child replaced the shared package tree")
    assert label.nearest_rejected.name == "Unisolated Workspace Writes" and label.rejection_reason
    assert (label.episode_id, label.comparative_role) == (
        "parallel-shared-final-tree-recopy",
        "parallel_adverse_but_not_outcome_differential",
    )


def test_unknown_labels_are_reported_and_kept(dictdb_study, trio):
    text = PUBLISHED_SAMPLE.read_text().replace("third_label: Final-Tree Overwrite", "third_label: Telepathic Merge")
    result = load(dictdb_study, parse_annotation_md(text))  # as final labels
    assert result.unknown == ["Failure 1: Shared State and Merge Problems > Concurrent Writes > Telepathic Merge"]
    final = FinalCoding.objects.get(study=dictdb_study)
    assert "Telepathic Merge" in final.note and not final.labels.exists() and not final.no_failure
    # as a coding it would have nothing to submit: refused, and nothing stored
    with pytest.raises(PublishedImportError, match=r"none of its labels \(Telepathic Merge\) is in the codebook"):
        load(dictdb_study, parse_annotation_md(text), annotator=trio[0])
    assert not Annotation.objects.filter(assignment__annotator=trio[0]).exists()


def test_label_under_the_wrong_parent_is_reported(dictdb_study):
    text = PUBLISHED_SAMPLE.read_text().replace("sub_label: Concurrent Writes", "sub_label: Overloaded Handoff")
    result = load(dictdb_study, parse_annotation_md(text))
    assert "files Final-Tree Overwrite under" in result.unknown[0]


def test_missing_run_is_an_error(dictdb_study):
    text = (
        PUBLISHED_SAMPLE.read_text()
        .replace("task_id: dictdatabase", "task_id: nope")
        .replace("pair_id: dictdatabase", "pair_id: nope")
    )
    with pytest.raises(AnnotationError, match="no concurrent run of task 'nope'"):
        load(dictdb_study, parse_annotation_md(text))


def test_a_record_is_kept_whole_and_its_oddities_reported(dictdb_study, trio, adjudicator, outsider):
    from annotation.models import PublishedRecord

    text = PUBLISHED_SAMPLE.read_text()
    failure = text[text.index("## Failure 1") :]
    odd = (
        "# dictdatabase / codex\n\n"  # a title above the header
        + text.replace("reasoning: The parallel run", "reasoning: The parallel run\nstill the same reasoning,", 1)
        + "\n" + failure.replace("## Failure 1", "## Failure 2")  # a second episode of the same mode
    )  # fmt: skip
    record = parse_annotation_md(odd, name="odd/annotation.md")
    assert record.pair_id == "dictdatabase/codex"
    assert record.failures[0].fields["reasoning"].split("\n")[1].startswith("still the same reasoning, had live")
    assert "Task-Solving Difference" in [s.title for s in record.sections] and record.text == odd
    for wrong in (adjudicator, outsider):
        with pytest.raises(AnnotationError, match="is not an annotator of"):
            load(dictdb_study, record, annotator=wrong)
    result = load(dictdb_study, record, annotator=trio[0])
    # the second block of the same mode is its second episode: an instance of its own, every field kept
    assert result.imported == ["Final-Tree Overwrite", "Final-Tree Overwrite (episode 2)"]
    first, second = Annotation.objects.get(assignment__annotator=trio[0]).labels.order_by("instance")
    assert (first.instance, second.instance) == (1, 2) and first.code_id == second.code_id
    assert second.rationale.startswith("The parallel run had live") and first.rationale.count("\n") == 1
    assert second.content() == {**first.content(), "instance": 2, "rationale": second.rationale}
    # the header says the serial run failed; the imported sequential run passed
    assert len(result.contradictions) == 1 and "field 'serial_solution_passed' says false" in result.contradictions[0]
    stored = PublishedRecord.objects.get()
    assert stored.text == odd and stored.data["header"]["outcome_relation"] == "parallel_only_pass"


def test_import_export_import_gives_the_same_record(dictdb_study, tmp_path):
    import io

    from django.core.management import call_command

    original = parse_annotation_md(PUBLISHED_SAMPLE.read_text(), name="annotation.md")
    load(dictdb_study, original)
    call_command("export_published", str(dictdb_study.pk), "--out", str(tmp_path / "out"), stdout=io.StringIO())
    written = list((tmp_path / "out").rglob("annotation.md"))
    assert len(written) == 1 and written[0].parent.name == "Codex"
    again = parse_annotation_md(written[0].read_text(), name="again.md")
    assert again.header == original.header
    assert [f.fields for f in again.failures] == [f.fields for f in original.failures]
    assert again.sections == original.sections
    # and importing what was exported stores the same final labels once more (as another study would)
    from annotation.services.studies import study_create

    other = study_create(name="Q", codebook=dictdb_study.codebook, annotators=list(dictdb_study.annotators.all()),
                         adjudicator=dictdb_study.adjudicator)  # fmt: skip
    load(other, again)
    first, second = (FinalCoding.objects.get(study=s).labels.get().content() for s in (dictdb_study, other))
    assert first == second


def test_the_structured_reviews_are_kept_and_summarised(dictdb_study, trio, tmp_path):
    import io
    import shutil

    from django.core.management import call_command

    from annotation.models import PublishedRecord
    from annotation.review_json import ReviewFormatError, parse_review

    folder = tmp_path / "nl2repo__dictdatabase__codex"
    shutil.copytree(PUBLISHED_SAMPLE.parent, folder)
    out = io.StringIO()
    call_command("import_published", str(dictdb_study.pk), str(folder), "--as-annotator", trio[0].username, stdout=out)
    assert "32 candidate decisions (7 anchors), 1 retained (Final-Tree Overwrite)" in out.getvalue()
    assert "advantage decision 'exclude'" in out.getvalue()
    stored = {r.kind: r for r in PublishedRecord.objects.all()}
    assert sorted(stored) == ["advantage-review", "annotation", "review"]
    assert stored["review"].path == "nl2repo/dictdatabase/codex/review.json"  # the flattened folder's parts
    review = stored["review"]
    assert (
        review.text == (PUBLISHED_SAMPLE.parent / "review.json").read_text()
        and len(review.data["taxonomy_decisions"]) == 13
    )
    bad = (
        (PUBLISHED_SAMPLE.parent / "review.json").read_text().replace('"decision": "reject"', '"decision": "maybe"', 1)
    )
    with pytest.raises(ReviewFormatError, match=r"field 'taxonomy_decisions\[0\]\.candidates\[0\]\.decision'"):
        parse_review(bad, name="review.json")


def test_a_value_of_several_paragraphs_survives_export_and_import():
    from annotation.annotation_md import render_annotation_md

    reasoning = "[ann1] the child overwrote the tree.\n\n[ann2] note: the parent re-applied it.\n  indented"
    text = render_annotation_md(
        data={"header": {"pair_id": "t/codex"}},
        failures=[{"top_label": "A", "sub_label": "B", "third_label": "C", "reasoning": reasoning,
                   "parallel_evidence": ["parallel/x.jsonl:3"], "rejection_reason": "single line"}],
    )  # fmt: skip
    fields = parse_annotation_md(text).failures[0].fields
    assert fields["reasoning"] == reasoning and fields["rejection_reason"] == "single line"
    assert "note" not in fields  # a `word:` line inside a value stays in the value


@pytest.mark.django_db
def test_the_folder_hint_finds_the_benchmark_in_any_spelling(tmp_path, codebook, trio, adjudicator):
    """The same task id in two benchmarks: the record's folder (`nl2repo__…`) picks the NL2RepoBench run."""
    for bench in ("NL2RepoBench", "LoopsBench"):
        for mode in ("concurrent", "sequential"):
            lines = simple_run("dictdatabase", mode, "Codex", n_sub=1 if mode == "concurrent" else 0)
            lines[0]["task"]["benchmark"] = bench
            write_jsonl(tmp_path / bench / f"{mode}.jsonl", lines)
    import_paths(paths=[tmp_path])
    study = study_create(name="P", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    record = parse_annotation_md(PUBLISHED_SAMPLE.read_text(), name="annotation.md")
    with pytest.raises(AnnotationError, match="ambiguous"):
        load(study, record, annotator=trio[0])
    result = load(study, record, "nl2repo/dictdatabase/codex", annotator=trio[0])
    assert study.runs.get(pk=result.run_id).task.benchmark.name == "NL2RepoBench"
