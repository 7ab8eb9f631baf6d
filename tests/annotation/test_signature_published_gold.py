"""The study's published decisions as the detectors' gold: review.json retains or rejects every candidate mode
of a pair, and that decision is a labelled positive or negative for the (run, mode) — explicit rejections are
counted as the negatives they are. The pure counts on hand-built runs, then the artifact's task folder loaded
as the study's published gold (read whole from the shared folder, skipped without it)."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command

from annotation.analysis import compute
from annotation.analysis.inputs import read_inputs
from annotation.analysis.signatures import COLUMNS, RunSignatures, evaluate_signatures, evaluation_rows
from annotation.analysis.store import analysis_refresh
from annotation.models import FinalCoding
from tests.factories import client_for
from trajectories.models import Run, SignatureHit
from trajectories.signatures import DETECTOR_MODES, DETECTOR_VERSION

TASK = "swebench_verified/django__django-10999"
TWO = {"d1": ("a", "b"), "d2": ("b",)}


def _by(rows: list[dict], key: str) -> dict:
    return {r[key] if key != "pair" else (r["detector"], r["mode"]): r for r in rows}


# -- the pure counts ---------------------------------------------------------------------------


def test_explicit_rejections_are_negatives_counted_apart():
    runs = [
        # the review rejects a and b; d1 fired listing both: two false positives the study ruled out
        RunSignatures(1, frozenset(), (("d1", ("a", "b")),), rejected=frozenset({"a", "b"}), reviewed=True),
        # the review retains b and rejects a; d2 fired on b: a true positive
        RunSignatures(2, frozenset({"b"}), (("d2", ("b",)),), rejected=frozenset({"a"}), reviewed=True),
        # no review: nothing fired, nothing in gold, a silent negative
        RunSignatures(3, frozenset()),
    ]
    result = evaluate_signatures(runs, detector_modes=TWO)
    assert result["reviewed_runs"] == 2
    modes = _by(result["modes"], "mode")
    assert (modes["a"]["fp"], modes["a"]["tn"], modes["a"]["rejected"], modes["a"]["fp_rejected"]) == (1, 2, 2, 1)
    assert (modes["b"]["tp"], modes["b"]["fp"], modes["b"]["rejected"], modes["b"]["fp_rejected"]) == (1, 1, 1, 1)
    detectors = _by(result["detectors"], "detector")
    # d1's modes are a and b: only run 1 rejects both; run 2 retains b (gold positive for d1, not fired: FN)
    assert (detectors["d1"]["fp"], detectors["d1"]["fn"], detectors["d1"]["rejected"]) == (1, 1, 1)
    assert detectors["d1"]["fp_rejected"] == 1
    assert (detectors["d2"]["tp"], detectors["d2"]["rejected"], detectors["d2"]["fp_rejected"]) == (1, 1, 0)
    pairs = _by(result["detector_modes"], "pair")
    assert (pairs["d1", "a"]["fp_rejected"], pairs["d1", "b"]["fp_rejected"]) == (1, 1)
    assert all({"rejected", "fp_rejected"} <= set(row) for row in evaluation_rows(result))
    assert COLUMNS.index("fp_rejected") > COLUMNS.index("recall")


def test_a_run_without_a_review_has_no_explicit_negatives():
    result = evaluate_signatures([RunSignatures(1, frozenset(), (("d1", ("a",)),))], detector_modes=TWO)
    assert result["reviewed_runs"] == 0
    assert all(row["rejected"] == 0 and row["fp_rejected"] == 0 for row in evaluation_rows(result))


# -- the artifact's task folder, its published records as gold -----------------------------------------


def _review_decisions(root, agent: str) -> dict[str, str]:
    """Read from the published file itself: each candidate's third label and its decision."""
    document = json.loads((root / TASK / agent / "review.json").read_text(encoding="utf-8"))
    return {
        candidate["third_label"]: candidate["decision"]
        for group in document["taxonomy_decisions"]
        for candidate in group["candidates"]
    }


@pytest.fixture
def published_gold(artifact_study, artifact_root):
    call_command("import_published", str(artifact_study.pk), str(artifact_root), "--as-gold", stdout=io.StringIO())
    return artifact_study


def _set_hits(run: Run, *hits: tuple[str, list[str]]) -> None:
    SignatureHit.objects.filter(run=run).delete()
    for position, (detector, modes) in enumerate(hits):
        SignatureHit.objects.create(run=run, detector=detector, modes=modes, evidence=[], explanation="x",
                                    detector_version=DETECTOR_VERSION, position=position)  # fmt: skip
    Run.objects.filter(pk=run.pk).update(signatures_version=DETECTOR_VERSION)


@pytest.mark.django_db
def test_the_published_decisions_are_the_gold_of_every_mode_they_decide(published_gold, artifact_root, codebook):
    names = dict(codebook.codes.filter(level="mode").values_list("name", "key"))
    runs = {run.agent.name: run for run in published_gold.runs.select_related("agent")}
    for run in runs.values():
        _set_hits(run)
    claude = runs["Claude Code"]
    # a hit on a mode the Claude review rejects (Early Child Termination) and one on a mode it retains
    _set_hits(
        claude, ("unfinished_children", ["early-child-termination"]), ("fanout_budget", ["fan-out-budget-exhaustion"])
    )
    result = compute.signatures(read_inputs(published_gold, parts=("signatures",)))
    assert result["reviewed_runs"] == 3 and result["runs"]["evaluated"] == 3
    modes = _by(result["modes"], "mode")
    decided = {agent: _review_decisions(artifact_root, agent) for agent in ("claude", "codex", "kimi")}
    for mode, row in modes.items():
        name = next(n for n, k in names.items() if k == mode)
        retained = sum(decided[agent][name] == "retain" for agent in decided)
        rejected = sum(decided[agent][name] == "reject" for agent in decided)
        assert (row["gold_positive"], row["rejected"]) == (retained, rejected), mode
    assert (modes["early-child-termination"]["fp"], modes["early-child-termination"]["fp_rejected"]) == (1, 1)
    assert (modes["fan-out-budget-exhaustion"]["tp"], modes["fan-out-budget-exhaustion"]["recall"]) == (1, 1.0)
    assert modes["fan-out-budget-exhaustion"]["rejected"] == 2  # Codex's and Kimi's reviews reject it


@pytest.mark.django_db
def test_a_review_decides_its_modes_over_the_final_labels_and_counts_without_them(published_gold, codebook):
    """The adjudicator's final labels say Unverified Global Completion, which the published review rejects: the
    published decision is the gold for that mode. A reviewed run whose final coding is gone still counts."""
    from annotation.models import FinalLabel

    claude = published_gold.runs.get(agent__name="Claude Code")
    final = FinalCoding.objects.get(study=published_gold, run=claude)
    unverified = codebook.codes.get(name="Unverified Global Completion")
    FinalLabel.objects.create(final=final, code=unverified, rationale="ruled later", instance=1)
    _set_hits(claude, ("verification_order", ["unverified-global-completion"]))
    modes = _by(compute.signatures(read_inputs(published_gold, parts=("signatures",)))["modes"], "mode")
    row = modes["unverified-global-completion"]
    assert (row["tp"], row["fp_rejected"]) == (0, 1)
    kimi = published_gold.runs.get(agent__name="Kimi Code")
    FinalCoding.objects.filter(study=published_gold, run=kimi).delete()
    result = compute.signatures(read_inputs(published_gold, parts=("signatures",)))
    assert result["runs"]["with_final"] == 3 and result["reviewed_runs"] == 3


@pytest.mark.django_db
def test_the_command_and_the_dashboard_say_which_negatives_were_published(published_gold, adjudicator, capsys):
    runs = list(published_gold.runs.all())
    for run in runs:
        _set_hits(run)
    claude = published_gold.runs.get(agent__name="Claude Code")
    _set_hits(claude, ("parent_idle_wait", list(DETECTOR_MODES["parent_idle_wait"])))
    call_command("evaluate_signatures", "--study", published_gold.name)
    printed = capsys.readouterr().out
    assert "3 of them with the study's published review" in printed
    line = next(x for x in printed.splitlines() if x.startswith("parent_idle_wait "))
    assert line.split() == ["parent_idle_wait", "3", "0", "1", "0", "2", "0.000", "n/a", "3", "1"]
    analysis_refresh(study_id=published_gold.pk)
    page = client_for(adjudicator).get(f"/annotate/studies/{published_gold.pk}/").content.decode()
    section = re.sub(r">\s+<", "><", page.split('id="signatures-vs-gold"')[1].split("</section>")[0])
    assert "<th>Rejected</th><th>FP rejected</th>" in section
    assert (
        "<td>parent_idle_wait</td><td>0</td><td>1</td><td>0</td><td>2</td><td>0.000</td><td>n/a</td><td>3</td><td>1</td>"
        in (section)
    )
    assert "the study's own <code>review.json</code> retains or rejects every candidate mode" in section
