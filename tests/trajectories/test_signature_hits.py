"""Signatures stored at import, recomputed by `detect_signatures`, found on the real sessions and,
exactly, on the generator's planted corpus; shown on the run page to whoever may see the run."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

import pytest
from django.core.management import CommandError, call_command

from tests.factories import FIXTURES, REAL, claude_line, claude_session, client_for, simple_run, write_jsonl
from trajectories.generate import MANIFEST_NAME, PLANTS, generate_planted
from trajectories.models import Run, SignatureHit
from trajectories.services import import_paths
from trajectories.signatures import DETECTOR_VERSION

pytestmark = pytest.mark.django_db

KIMI_SWARM = FIXTURES / "signatures" / "kimi-swarm"


def _imported(*paths) -> Run:
    report = import_paths(paths=list(paths))
    assert report.count("imported") == 1, [r.message for r in report.results]
    return Run.objects.get(pk=next(r.run_id for r in report.results if r.status == "imported"))


def _hits(run: Run) -> dict[str, list[SignatureHit]]:
    found = defaultdict(list)
    for hit in run.signature_hits.order_by("position"):
        found[hit.detector].append(hit)
    return dict(found)


def _events(hit: SignatureHit) -> list[tuple]:
    return [(e["agent"], e["seq"], e["file"]) for e in hit.evidence]


# -- real sessions (tests/fixtures/README.md) ------------------------------------------------


def test_kimi_swarm_two_sub_agents_editing_the_shared_workspace_at_once():
    run = _imported(KIMI_SWARM)
    hits = _hits(run)
    # The AgentSwarm call blocks the main agent 108 s, but agent-0 comes back completed: a wait, not one
    # that timed out, so no blind-timeout-wait is claimed.
    assert set(hits) == {"unisolated_workspace_writes"}
    [unisolated] = hits["unisolated_workspace_writes"]
    # agent-0's Edit of backends.py (journal seq 30) and agent-1's Edit of the tests (journal seq 96),
    # while agent-0 was still running (it completed at journal seq 108).
    assert _events(unisolated) == [
        ("agent-0", 3, "/workspace/django/contrib/auth/backends.py"),
        ("agent-1", 17, "/workspace/tests/auth_tests/test_auth_backends.py"),
    ]
    assert unisolated.modes == ["unisolated-workspace-writes", "cross-file-scope-collision"]
    assert unisolated.evidence[1]["time"].startswith("2026-08-14T14:42:26.297")
    assert "agent-0 running" in unisolated.evidence[1]["note"] and unisolated.wrong_if.startswith("Wrong if")
    assert run.signatures_version == DETECTOR_VERSION and run.signatures_note == ""


def test_kimi_excerpt_cut_before_the_main_agent_finished_claims_no_finish():
    hits = _hits(_imported(REAL / "kimi"))
    # The 96-line excerpt stops while both sub-agents run: nothing about finishing, verifying or a wait
    # that timed out (nothing says it did).
    assert set(hits) == set()


def test_claude_code_inline_refused_spawn_serial_sub_agents_and_a_file_read_twice():
    hits = _hits(_imported(REAL / "claude-code-inline"))
    # the main agent blocks on its Task calls, but each sub-agent comes back: no timed-out wait
    assert set(hits) == {"fanout_budget", "serial_subagents", "duplicated_reads"}
    [refused] = hits["fanout_budget"]
    assert _events(refused) == [("main", 11, "")]  # the Task call that failed InputValidationError
    assert "task-toolu_018t5jce2ZNoGr2ADsHGQife" in refused.explanation
    [serial] = hits["serial_subagents"]
    # both ran before the main agent's first write, which closes the evidence
    assert [e["agent"] for e in serial.evidence] == [
        "task-toolu_014YF9TXhDRR7BnpasNJ7gjC",
        "task-toolu_01LKfUwrsnof18CpWZQcJH44",
        "main",
    ]
    assert "before the main agent's first write" in serial.explanation
    [reads] = hits["duplicated_reads"]
    assert {e["file"] for e in reads.evidence} == {"/path/to/Demo/todo-app/package.json"}


def test_claude_code_workflow_killed_sub_agent_without_the_parents_log_claims_nothing():
    run = _imported(REAL / "claude-code-workflow")
    # The parent's transcript is not in the bundle: whether it went on without its killed sub-agent (early
    # termination), waited on it or was cut off with it cannot be told, so nothing is claimed.
    assert _hits(run) == {} and run.signatures_note == ""


def test_claude_code_retried_slot_that_redoes_no_work_is_not_a_checkpoint_free_retry(tmp_path):
    projects = claude_session(tmp_path)  # the Claude Code 2.1.207 layout of the real workflow, built small
    w2 = projects / "-testbed" / "c6d74503-f6d8-4e90-8d4e-a0c06f8ba1c1" / "subagents" / "workflows" / "wf_abc123"
    write_jsonl(w2 / "agent-w2.jsonl", [
        claude_line("user", 21, "slot prompt w1", agentId="w2", isSidechain=True),  # attempt 2 gets attempt 1's prompt
        claude_line("assistant", 50, [{"type": "text", "text": "ok"}]),
    ])  # fmt: skip
    # Attempt 2 starts from attempt 1's prompt (a retry does) but redoes none of its work: not claimed.
    assert "checkpoint_free_retry" not in _hits(_imported(projects))


@pytest.mark.parametrize(
    ("fixture", "note"),
    [
        ("codex", "no events: nothing to examine"),  # a child rollout's session_meta line only
        ("swe-agent", "no sub-agents: the concurrency signatures do not apply"),
        ("openhands", "no sub-agents: the concurrency signatures do not apply"),
    ],
)
def test_runs_that_cannot_show_a_signature_say_why(fixture, note):
    run = _imported(REAL / fixture)
    assert run.signature_hits.count() == 0 and run.signatures_note == note


# -- the planted corpus ------------------------------------------------------------------------


def test_planted_signatures_are_found_with_precision_and_recall_one(tmp_path):
    generate_planted(tmp_path / "planted", seed=3, copies=2)
    manifest = json.loads((tmp_path / "planted" / MANIFEST_NAME).read_text())
    report = import_paths(paths=[tmp_path / "planted"])
    assert report.count("imported") == len(manifest) == 2 * (len(PLANTS) + 1)
    found = {
        run.source_name.rsplit("/", 1)[-1]: {h.detector for h in run.signature_hits.all()}
        for run in Run.objects.prefetch_related("signature_hits")
    }
    for detector in PLANTS:
        planted = {name for name, plants in manifest.items() if detector in plants}
        detected = {name for name, dets in found.items() if detector in dets}
        assert planted, detector
        assert detected == planted, (detector, detected ^ planted)  # precision = recall = 1.0
    assert all(found[name] == set() for name, plants in manifest.items() if not plants)


def test_the_planted_corpus_is_reproducible_and_the_default_corpus_does_not_change(tmp_path):
    a, b = generate_planted(tmp_path / "a", seed=1), generate_planted(tmp_path / "b", seed=1)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    call_command("generate_corpus", "--plant", "--copies", "1", "--out", str(tmp_path / "c"))
    assert len(json.loads((tmp_path / "c" / MANIFEST_NAME).read_text())) == len(PLANTS) + 1


# -- recomputing -------------------------------------------------------------------------------


def test_detect_signatures_replaces_a_runs_hits_and_is_idempotent():
    run = _imported(KIMI_SWARM)
    before = list(run.signature_hits.values_list("detector", "evidence", "explanation"))
    SignatureHit.objects.filter(run=run).update(explanation="stale")
    SignatureHit.objects.create(run=run, detector="old", modes=[], evidence=[], explanation="x", detector_version=0)
    Run.objects.filter(pk=run.pk).update(signatures_version=None)
    call_command("detect_signatures", "--run", str(run.pk))
    call_command("detect_signatures", "--all")
    assert list(run.signature_hits.values_list("detector", "evidence", "explanation")) == before
    run.refresh_from_db()
    assert run.signatures_version == DETECTOR_VERSION


def test_detect_signatures_stale_recomputes_only_the_runs_older_rules_or_nobody_checked(tmp_path):
    old, current, unchecked = (_imported(write_jsonl(tmp_path / f"{n}.jsonl", simple_run(n))) for n in "abc")
    Run.objects.filter(pk=old.pk).update(signatures_version=DETECTOR_VERSION - 1)
    Run.objects.filter(pk=unchecked.pk).update(signatures_version=None)
    SignatureHit.objects.update(explanation="as stored")
    call_command("detect_signatures", "--stale")
    recomputed = {run.pk for run in Run.objects.filter(signature_hits__explanation__gt="").exclude(
        signature_hits__explanation="as stored")}  # fmt: skip
    assert recomputed == {old.pk, unchecked.pk}
    assert set(Run.objects.values_list("signatures_version", flat=True)) == {DETECTOR_VERSION}
    assert not SignatureHit.objects.filter(run=current).exclude(explanation="as stored").exists()


def test_detect_signatures_names_a_missing_run_and_needs_a_choice():
    with pytest.raises(CommandError, match="no run with id 999"):
        call_command("detect_signatures", "--run", "999")
    with pytest.raises(CommandError):
        call_command("detect_signatures")
    with pytest.raises(CommandError, match="not allowed with"):
        call_command("detect_signatures", "--stale", "--all")


def test_a_malformed_stored_run_is_checked_without_crashing(tmp_path):
    run = _imported(write_jsonl(tmp_path / "r.jsonl", simple_run("odd", n_sub=2)))
    run.events.all().delete()
    call_command("detect_signatures", "--run", str(run.pk))
    run.refresh_from_db()
    assert run.signature_hits.count() == 0 and run.signatures_note == "no events: nothing to examine"


# -- the run page ------------------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path):
    # The extended Kimi excerpt in the study's cell layout (its real cell.json), beside a sequential twin.
    cell = tmp_path / "corpus" / "swebench_verified" / "django__django-11451" / "kimi" / "parallel"
    shutil.copytree(KIMI_SWARM, cell / "agent" / "kimi")
    shutil.copy(
        FIXTURES / "corpus" / "swebench_verified" / "django__django-11451" / "kimi" / "parallel" / "cell.json", cell
    )
    _imported(tmp_path / "corpus")
    write_jsonl(tmp_path / "seq.jsonl", simple_run("django__django-11451", "sequential", "Kimi Code", n_sub=0))
    return _imported(tmp_path / "seq.jsonl"), Run.objects.get(mode="concurrent")


def test_the_run_page_shows_both_runs_signatures(browser_client, pair):
    sequential, concurrent = pair
    body = browser_client.get(f"/trajectories/runs/{sequential.pk}/").content.decode()
    assert "Signatures" in body and "unisolated_workspace_writes" in body
    assert "cross-file-scope-collision" in body and "event #17" in body and "14:42:26" in body
    assert "no sub-agents: the concurrency signatures do not apply" in body  # the sequential twin
    for text in ("{%", "{{", "{#"):
        assert text not in body


def test_a_run_not_yet_checked_says_so(browser_client, pair):
    _, concurrent = pair
    Run.objects.filter(pk=concurrent.pk).update(signatures_version=None)
    SignatureHit.objects.all().delete()
    assert "not checked yet" in browser_client.get(f"/trajectories/runs/{concurrent.pk}/").content.decode()


def test_hits_found_by_older_rules_say_so_until_recomputed(browser_client, pair):
    _, concurrent = pair
    page = f"/trajectories/runs/{concurrent.pk}/"
    assert "Found by older rules" not in browser_client.get(page).content.decode()
    Run.objects.filter(pk=concurrent.pk).update(signatures_version=DETECTOR_VERSION - 1)
    body = browser_client.get(page).content.decode()
    assert (
        f"Found by older rules (detectors version {DETECTOR_VERSION - 1}; these are version {DETECTOR_VERSION})" in body
    )
    assert "detect_signatures --stale" in body
    call_command("detect_signatures", "--stale")
    assert "Found by older rules" not in browser_client.get(page).content.decode()


def test_an_annotator_who_cannot_see_the_run_sees_none_of_its_signatures(annotator, outsider, pair):
    _, concurrent = pair
    for user in (annotator, outsider):
        response = client_for(user).get(f"/trajectories/runs/{concurrent.pk}/")
        assert response.status_code == 404
        assert b"unisolated_workspace_writes" not in response.content


def test_hits_go_with_their_run(pair):
    _, concurrent = pair
    assert SignatureHit.objects.filter(run=concurrent).exists()
    concurrent.delete()
    assert not SignatureHit.objects.filter(run_id=concurrent.pk).exists()
