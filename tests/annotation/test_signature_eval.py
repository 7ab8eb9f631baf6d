"""Failure signatures measured against a study's final labels: the pure counts (hand-built cases with
known answers, the undefined cases, scikit-learn's own precision and recall), the selector's fixed
number of queries, the `evaluate_signatures` command and its bad input, the dashboard's table and
CSV export (the study's lead only), and the planted corpus."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from unittest.mock import patch

import pytest
from django.core.management import CommandError, call_command
from sklearn.metrics import precision_score, recall_score

from annotation.analysis import compute
from annotation.analysis.inputs import read_inputs
from annotation.analysis.signatures import COLUMNS, RunSignatures, evaluate_signatures, evaluation_rows
from annotation.analysis.store import analysis_refresh, stored_analysis
from annotation.models import Assignment, FinalCoding
from annotation.services.studies import study_assign, study_create
from tests.factories import both, cite, client_for, code_run, mode_code
from trajectories.generate import MANIFEST_NAME, PLANTED_MODES, PLANTS, generate_planted
from trajectories.models import Run, SignatureHit
from trajectories.services import import_paths
from trajectories.signatures import DETECTOR_MODES, DETECTOR_VERSION, DETECTORS

TWO = {"d1": ("a", "b"), "d2": ("b",)}


def _by(rows: list[dict], key: str) -> dict[str, dict]:
    return {r[key] if key != "pair" else (r["detector"], r["mode"]): r for r in rows}


def _counts(row: dict) -> tuple:
    return row["tp"], row["fp"], row["fn"], row["tn"], row["precision"], row["recall"]


# -- the pure counts ---------------------------------------------------------------------------


def test_hand_built_runs_give_the_counts_worked_out_by_hand():
    runs = [
        RunSignatures(1, frozenset({"a"}), (("d1", ("a", "b")),)),
        RunSignatures(2, frozenset({"b"}), (("d2", ("b",)),)),
        RunSignatures(3, frozenset()),  # "no failure", nothing fired
        RunSignatures(4, frozenset({"a"}), (("d1", ("b",)),)),  # a rule of d1 that lists only b
        RunSignatures(5, frozenset({"a"}), (("d1", ("a",)),), checked=False),  # left out, counted
    ]
    result = evaluate_signatures(runs, detector_modes=TWO)
    assert result["runs"] == {"with_final": 5, "evaluated": 4, "unchecked": 1}
    assert (result["gold_pairs"], result["gold_pairs_covered"]) == (3, 3)
    pairs = _by(result["detector_modes"], "pair")
    assert _counts(pairs["d1", "a"]) == (1, 0, 1, 2, 1.0, 0.5)
    assert _counts(pairs["d1", "b"]) == (0, 2, 1, 1, 0.0, 0.0)
    assert _counts(pairs["d2", "b"]) == (1, 0, 0, 3, 1.0, 1.0)
    detectors = _by(result["detectors"], "detector")
    assert _counts(detectors["d1"]) == (2, 0, 1, 1, 1.0, pytest.approx(2 / 3))  # gold: a or b
    assert _counts(detectors["d2"]) == (1, 0, 0, 3, 1.0, 1.0)
    modes = _by(result["modes"], "mode")
    assert _counts(modes["a"]) == (1, 0, 1, 2, 1.0, 0.5)
    assert _counts(modes["b"]) == (1, 2, 0, 1, pytest.approx(1 / 3), 1.0)  # d1 or d2 listing b
    assert all(r["runs"] == 4 for r in evaluation_rows(result))
    assert {r["gold_positive"] for r in [modes["b"]]} == {1} and modes["b"]["predicted_positive"] == 3


def test_undefined_precision_and_recall_are_none_not_zero():
    runs = [
        RunSignatures(1, frozenset({"a"})),  # gold a, nothing fired
        RunSignatures(2, frozenset(), (("d2", ("b",)),)),  # b fired, never in gold
    ]
    result = evaluate_signatures(runs, detector_modes={"d1": ("a",), "d2": ("b",), "d3": ("c",)})
    modes = _by(result["modes"], "mode")
    assert _counts(modes["a"]) == (0, 0, 1, 1, None, 0.0)  # never fired: precision undefined
    assert _counts(modes["b"]) == (0, 1, 0, 1, 0.0, None)  # never in gold: recall undefined
    assert _counts(modes["c"]) == (0, 0, 0, 2, None, None)  # neither
    empty = evaluate_signatures([], detector_modes=TWO)
    assert empty["runs"] == {"with_final": 0, "evaluated": 0, "unchecked": 0}
    assert all(_counts(r) == (0, 0, 0, 0, None, None) for r in evaluation_rows(empty))


def test_a_mode_missing_from_the_codebook_is_flagged_and_not_scored():
    runs = [RunSignatures(1, frozenset(), (("d1", ("a", "b")),))]
    result = evaluate_signatures(runs, detector_modes=TWO, codebook_modes={"a": "Mode A"})
    modes = _by(result["modes"], "mode")
    assert modes["a"]["name"] == "Mode A" and modes["a"]["in_codebook"] and modes["a"]["precision"] == 0.0
    assert not modes["b"]["in_codebook"] and modes["b"]["fp"] == 1 and modes["b"]["precision"] is None
    assert not _by(result["detectors"], "detector")["d2"]["in_codebook"]


def test_hits_of_unknown_detectors_and_unsupported_modes_are_ignored():
    runs = [RunSignatures(1, frozenset({"b"}), (("old", ("b",)), ("d1", ("z",))))]
    result = evaluate_signatures(runs, detector_modes=TWO)
    assert _by(result["modes"], "mode")["b"]["tp"] == 0
    assert _by(result["detectors"], "detector")["d1"]["tp"] == 1  # d1 fired; gold b is one of its modes
    assert [r["mode"] for r in result["modes"]] == ["a", "b"]


def test_per_mode_figures_agree_with_scikit_learn():
    rng = random.Random(7)
    modes = {"d1": ("a", "b"), "d2": ("b", "c"), "d3": ("c",)}
    runs = []
    for run_id in range(60):
        gold = frozenset(m for m in "abc" if rng.random() < 0.3)
        hits = tuple((d, tuple(m for m in ms if rng.random() < 0.5)) for d, ms in modes.items() if rng.random() < 0.4)
        runs.append(RunSignatures(run_id, gold, hits))
    result = evaluate_signatures(runs, detector_modes=modes)
    for mode, row in _by(result["modes"], "mode").items():
        truth = [mode in r.gold for r in runs]
        predicted = [any(mode in listed for _, listed in r.hits) for r in runs]
        assert row["precision"] == pytest.approx(precision_score(truth, predicted, zero_division=0.0))
        assert row["recall"] == pytest.approx(recall_score(truth, predicted, zero_division=0.0))


def test_every_detector_says_which_modes_it_supports():
    assert list(DETECTOR_MODES) == list(DETECTORS)
    assert all(modes and len(set(modes)) == len(modes) for modes in DETECTOR_MODES.values())


# -- a study ------------------------------------------------------------------------------------


def _agree(study, run, codes) -> None:
    """Both annotators of the run submit the same modes: its final coding (agreed)."""
    for assignment in Assignment.objects.filter(study=study, run=run).order_by("slot"):
        code_run(assignment, codes)


def _set_hits(run: Run, *hits: tuple[str, list[str]], version: int | None = DETECTOR_VERSION) -> None:
    SignatureHit.objects.filter(run=run).delete()
    for position, (detector, modes) in enumerate(hits):
        SignatureHit.objects.create(run=run, detector=detector, modes=modes, evidence=[], explanation="x",
                                    detector_version=DETECTOR_VERSION, position=position)  # fmt: skip
    Run.objects.filter(pk=run.pk).update(signatures_version=version)


@pytest.fixture
def judged(db, study, codebook):
    """The `study` with four final codings over known hits: collision confirmed; collision hit but
    gold says something else; gold collision with no hit; and one run whose signatures were never
    computed."""
    runs = list(study.runs.order_by("pk"))
    same, lossy = mode_code(codebook, "same-file-collision"), mode_code(codebook, "lossy-handoff")
    collision = ("same_file_collision", list(DETECTOR_MODES["same_file_collision"]))
    _set_hits(runs[0], collision)
    _set_hits(runs[1], collision)
    _set_hits(runs[2])
    _set_hits(runs[3], collision, version=None)
    for run, codes in zip(runs, ([same], [lossy], [same], [same]), strict=False):
        _agree(study, run, codes)
    assert FinalCoding.objects.filter(study=study).count() == 4
    return study


@pytest.mark.django_db
def test_the_study_selector_reads_final_labels_against_stored_hits(judged):
    result = compute.signatures(read_inputs(judged, parts=("signatures",)))
    assert result["runs"] == {"with_final": 4, "evaluated": 3, "unchecked": 1}
    assert result["detector_version"] == DETECTOR_VERSION
    assert _counts(_by(result["detectors"], "detector")["same_file_collision"]) == (1, 1, 1, 0, 0.5, 0.5)
    mode = _by(result["modes"], "mode")["same-file-collision"]
    assert _counts(mode) == (1, 1, 1, 0, 0.5, 0.5) and mode["name"] == "Same-File Collision"
    assert _counts(_by(result["modes"], "mode")["source-overwrite"]) == (0, 2, 0, 1, 0.0, None)
    assert (result["gold_pairs"], result["gold_pairs_covered"]) == (3, 2)


@pytest.mark.django_db
def test_reading_the_signature_inputs_costs_the_same_however_large_the_study(judged, codebook):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        compute.signatures(read_inputs(judged, parts=("signatures",)))
    same = mode_code(codebook, "same-file-collision")
    for run in judged.runs.order_by("pk")[4:]:
        _set_hits(run, ("same_file_collision", ["same-file-collision"]), ("parent_idle_wait", ["blind-timeout-wait"]))
        _agree(judged, run, [same])
    with CaptureQueriesContext(connection) as large:
        assert compute.signatures(read_inputs(judged, parts=("signatures",)))["runs"]["with_final"] == 6
    # the study's names, agents and runs; modes, finals with versions, gold, published reviews, hits, hints seen
    assert len(large) == len(small) <= 9


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_evaluate_signatures_prints_the_tables_and_writes_the_csv(judged, tmp_path, capsys):
    out = tmp_path / "eval.csv"
    call_command("evaluate_signatures", "--study", judged.name, "--csv", str(out))
    printed = capsys.readouterr().out
    assert "3 runs with final labels and signatures" in printed and "1 runs with final labels left out" in printed
    line = next(x for x in printed.splitlines() if x.startswith("same_file_collision "))
    assert line.split() == ["same_file_collision", "3", "1", "1", "1", "0", "0.500", "0.500"]
    assert "n/a" in next(x for x in printed.splitlines() if x.startswith("fanout_budget "))
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == sum(map(len, DETECTOR_MODES.values())) + len(DETECTOR_MODES) + len(
        {m for ms in DETECTOR_MODES.values() for m in ms}
    )
    row = next(r for r in rows if r["table"] == "detector" and r["detector"] == "fanout_budget")
    assert (row["tp"], row["fp"], row["precision"], row["recall"]) == ("0", "0", "", "")  # undefined: empty
    call_command("evaluate_signatures", "--study", str(judged.pk))  # by id too


@pytest.mark.django_db
def test_evaluate_signatures_refuses_bad_input(study, judged, tmp_path):
    with pytest.raises(CommandError, match="no study 'Nope'"):
        call_command("evaluate_signatures", "--study", "Nope")
    with pytest.raises(CommandError, match="no study '999'"):
        call_command("evaluate_signatures", "--study", "999")
    with pytest.raises(CommandError):
        call_command("evaluate_signatures")  # --study is required
    with pytest.raises(CommandError, match=r"--csv .*cannot write"):
        call_command("evaluate_signatures", "--study", judged.name, "--csv", str(tmp_path / "no" / "dir.csv"))
    Run.objects.update(signatures_version=None)
    with pytest.raises(CommandError, match="detect_signatures --all"):
        call_command("evaluate_signatures", "--study", judged.name)


@pytest.mark.django_db
def test_evaluate_signatures_needs_final_labels(study):
    with pytest.raises(CommandError, match="no final labels yet"):
        call_command("evaluate_signatures", "--study", study.name)


# -- the dashboard and the export --------------------------------------------------------------


@pytest.mark.django_db
def test_the_dashboard_shows_the_stored_table_to_the_studys_lead(judged, adjudicator, admin_user):
    before = client_for(adjudicator).get(f"/annotate/studies/{judged.pk}/").content.decode()
    assert "Failure signatures against the final labels" not in before  # nothing computed yet
    analysis_refresh(study_id=judged.pk)
    for user in (adjudicator, admin_user):
        page = client_for(user).get(f"/annotate/studies/{judged.pk}/").content.decode()
        section = re.sub(r">\s+<", "><", page.split('id="signatures-vs-gold"')[1].split("</section>")[0])
        assert "3 runs with final labels and signatures" in section and "1 left out" in section
        assert "<td>same_file_collision</td><td>1</td><td>1</td><td>1</td><td>0</td><td>0.500</td><td>0.500</td>" in (
            section
        )
        assert "<td>fanout_budget</td><td>0</td><td>0</td><td>0</td><td>3</td><td>n/a</td><td>n/a</td>" in section
        assert f"/annotate/studies/{judged.pk}/export/signatures.csv" in section


@pytest.mark.django_db
def test_recomputed_hits_make_the_studys_stored_figures_not_current(judged):
    analysis_refresh(study_id=judged.pk)
    assert stored_analysis(judged).current
    run = judged.runs.order_by("pk").first()
    twin = Run.objects.get(task=run.task, agent=run.agent, mode="sequential")  # in no study
    call_command("detect_signatures", "--run", str(twin.pk))
    assert stored_analysis(judged).current
    call_command("detect_signatures", "--run", str(run.pk))
    assert not stored_analysis(judged).current  # the dashboard says so; the worker recomputes them
    analysis_refresh(study_id=judged.pk)
    figures = stored_analysis(judged).document.signatures
    assert figures == json.loads(
        json.dumps(compute.signatures(read_inputs(judged, parts=("signatures",))), default=str)
    )


def test_the_csv_export_streams_the_stored_rows_and_is_refused_before_there_are_any(judged, adjudicator):
    from annotation.models import StudyStatistics

    client = client_for(adjudicator)
    url = f"/annotate/studies/{judged.pk}/export/signatures.csv"
    api_url = f"/api/studies/{judged.pk}/exports/signatures/"
    with patch("annotation.analysis.store.analysis_request") as asked:  # no worker: nothing lands meanwhile
        refused = client.get(url)  # nothing stored: never computed in the request
        assert refused.status_code == 409 and "not computed yet" in refused.content.decode()
        assert client.get(api_url).status_code == 409 and asked.call_count == 2
    assert not StudyStatistics.objects.filter(study=judged).exists()
    analysis_refresh(study_id=judged.pk)
    stored = b"".join(client.get(url).streaming_content).decode()
    row = next(r for r in csv.DictReader(io.StringIO(stored)) if r["table"] == "detector × mode")
    assert (row["detector"], row["mode"], row["tp"], row["precision"]) == (
        "same_file_collision",
        "same-file-collision",
        "1",
        "0.5",
    )
    api = client.get(api_url)
    assert api.status_code == 200 and api["X-Parallax-Statistics-Current"] == "true"
    assert len(api.json()) == len(list(csv.DictReader(io.StringIO(stored))))


@pytest.mark.django_db
def test_annotators_and_outsiders_get_no_signature_figures(judged, trio, outsider):
    analysis_refresh(study_id=judged.pk)
    for user in (*trio, outsider):
        client = client_for(user)
        assert client.get(f"/annotate/studies/{judged.pk}/export/signatures.csv").status_code == 403
        assert client.get(f"/annotate/studies/{judged.pk}/").status_code == 403


# -- the planted corpus -------------------------------------------------------------------------


@pytest.mark.django_db
def test_on_the_planted_corpus_every_planted_signature_is_found(tmp_path, codebook, trio, adjudicator):
    """Gold = the modes each plant was built to show (PLANTED_MODES), coded by two annotators who
    agree: every detector is precise, and every planted mode is found (recall 1.0). The two
    detectors that share serial-investigation each find only their own plant of it: recall 0.5."""
    generate_planted(tmp_path / "planted", seed=5, copies=2, twins=True)
    manifest = json.loads((tmp_path / "planted" / MANIFEST_NAME).read_text())
    import_paths(paths=[tmp_path / "planted"])
    runs = {run.source_name.rsplit("/", 1)[-1]: run for run in Run.objects.filter(mode="concurrent")}
    assert len(runs) == len(manifest) and Run.objects.filter(mode="sequential").count() == len(manifest)
    study = study_create(name="Planted", codebook=codebook, annotators=trio, adjudicator=adjudicator,
                         run_ids=[r.pk for r in runs.values()])  # fmt: skip
    study_assign(study=study)
    for name, plants in manifest.items():
        codes = [mode_code(codebook, key) for plant in plants for key in PLANTED_MODES[plant]]
        _agree(study, runs[name], codes)
    for hit in SignatureHit.objects.all():
        assert set(hit.modes) <= set(DETECTOR_MODES[hit.detector]), hit

    result = compute.signatures(read_inputs(study, parts=("signatures",)))
    assert result["runs"] == {"with_final": 20, "evaluated": 20, "unchecked": 0}
    detectors = _by(result["detectors"], "detector")
    for detector in PLANTS:
        row = detectors[detector]
        shared = detector in ("serial_subagents", "duplicated_reads")
        assert (row["tp"], row["fp"], row["precision"]) == (2, 0, 1.0), detector
        assert row["recall"] == (0.5 if shared else 1.0), detector
    modes = _by(result["modes"], "mode")
    for key in {k for keys in PLANTED_MODES.values() for k in keys}:
        assert (modes[key]["fp"], modes[key]["fn"], modes[key]["precision"], modes[key]["recall"]) == (0, 0, 1.0, 1.0)
    pairs = _by(result["detector_modes"], "pair")
    for detector, keys in PLANTED_MODES.items():
        if detector not in ("serial_subagents", "duplicated_reads"):
            assert all(pairs[detector, key]["recall"] == 1.0 for key in keys), detector


def test_the_planted_corpus_can_come_with_sequential_twins(tmp_path):
    call_command("generate_corpus", "--plant", "--twins", "--copies", "1", "--seed", "2", "--out", str(tmp_path / "a"))
    generate_planted(tmp_path / "b", seed=2, copies=1, twins=True)
    twins = sorted(p.name for p in (tmp_path / "a" / "twins").iterdir())
    assert twins == sorted(name.replace(".jsonl", "-sequential.jsonl") for name in json.loads(
        (tmp_path / "a" / MANIFEST_NAME).read_text()))  # fmt: skip
    assert all(
        (tmp_path / "a" / "twins" / n).read_bytes() == (tmp_path / "b" / "twins" / n).read_bytes() for n in twins
    )


@pytest.mark.django_db
def test_gold_reached_after_the_hints_were_seen_is_measured_apart(study, codebook, adjudicator):
    """Incorporation bias: the hints are the detectors' hits. Runs whose final labels were reached with no
    hint seen are measured on their own too, beside every run — here the collision detector looks perfect
    on the runs whose coders saw its hit first, and is measured without them."""
    from annotation.analysis.inputs import hint_free_runs
    from annotation.models import Discussion, Study
    from annotation.selectors.queue import annotation_for
    from annotation.services import review as flow
    from annotation.services.coding import LabelInput, annotation_revise
    from annotation.services.hints import annotation_hints_show

    Study.objects.filter(pk=study.pk).update(hint_policy="always")
    study.refresh_from_db()
    same, lossy = mode_code(codebook, "same-file-collision"), mode_code(codebook, "lossy-handoff")
    collision = ("same_file_collision", list(DETECTOR_MODES["same_file_collision"]))
    runs = list(study.runs.order_by("pk"))
    for run in runs[:5]:
        _set_hits(run, collision)
    _set_hits(runs[5])  # no hit: nothing to show, whatever was opened

    def show(assignment):
        annotation_hints_show(annotation=annotation_for(assignment=assignment), actor=assignment.annotator)

    a, b = both(study, runs[0])  # agreed; a coder showed the hit before submitting: exposed
    show(a)
    code_run(a, [same])
    code_run(b, [same])
    a, b = both(study, runs[1])  # agreed; the hit shown only after that coder's own submission: free
    code_run(a, [same])
    show(a)
    code_run(b, [same])
    a, b = both(study, runs[2])  # consensus after B showed the hit and revised to it: exposed
    code_run(a, [same])
    code_run(b, [lossy])
    show(b)
    discussion = Discussion.objects.get(run=runs[2])
    annotation = annotation_for(assignment=b)
    revised = [LabelInput(same.pk, "seen", evidence=[cite(runs[2])])]
    annotation_revise(discussion=discussion, annotation=annotation, actor=b.annotator, version=annotation.version,
                      no_failure=False, notes="", labels=revised)  # fmt: skip
    flow.discussion_consensus(discussion=discussion, actor=a.annotator)
    a, b = both(study, runs[3])  # adjudicated with a hit: the adjudication page shows it: exposed
    code_run(a, [lossy])
    code_run(b, [])
    discussion = Discussion.objects.get(run=runs[3])
    flow.discussion_escalate(discussion=discussion, actor=a.annotator)
    flow.adjudicate(discussion=discussion, actor=adjudicator, rulings=[flow.Ruling(lossy.pk, "ruled")])
    _agree(study, runs[4], [lossy])  # agreed, no hint shown, the detector fired wrongly: free
    a, b = both(study, runs[5])  # hints shown before submitting, but no hit to see: free
    show(a)
    code_run(a, [same])
    code_run(b, [same])

    assert hint_free_runs(study=study) == {runs[1].pk, runs[4].pk, runs[5].pk}
    result = compute.signatures(read_inputs(study, parts=("signatures",)))
    assert result["hint_free_runs"] == {"with_final": 3, "evaluated": 3, "unchecked": 0}
    row = _by(result["detectors"], "detector")["same_file_collision"]
    # every run: fired on 0, 1, 2, 3, 4; gold collision on 0, 1, 2, 5 -> TP 3, FP 2, FN 1
    assert _counts(row) == (3, 2, 1, 0, 0.6, 0.75)
    # no hints seen: runs 1 (TP), 4 (FP), 5 (FN)
    free = row["hint_free"]
    assert (free["tp"], free["fp"], free["fn"], free["tn"], free["precision"], free["recall"]) == (1, 1, 1, 0, 0.5, 0.5)
    flat = _by([r for r in evaluation_rows(result) if r["table"] == "detector"], "detector")["same_file_collision"]
    assert (flat["precision_hint_free"], flat["recall_hint_free"]) == (0.5, 0.5)
    analysis_refresh(study_id=study.pk)
    page = client_for(adjudicator).get(f"/annotate/studies/{study.pk}/").content.decode()
    section = re.sub(r">\s+<", "><", page.split('id="signatures-vs-gold"')[1].split("</section>")[0])
    assert "Precision, no hints" in section and "the 3 of these runs whose final labels were reached" in section
    assert '<td>0.600</td><td>0.750</td><td title="TP 1, FP 1, FN 1, TN 0">0.500</td>' in section
