"""stats.changes.coding_diff: what changed in a coding since its first submission, on plain snapshots."""

from __future__ import annotations

from annotation.coding_changes import coding_diff

NAMES = {"lossy": "Lossy Handoff", "stale": "Stale Handoff", "merge": "Merge after Verification"}


def label(code, instance=1, **fields):
    return {"code": code, "instance": instance, "rationale": "", "realized_consequence": "", "evidence": [],
            "contrast": [], "nearest_rejected": None, "rejection_reason": "", "episode_id": "",
            "comparative_role": "", **fields}  # fmt: skip


def snap(*labels, no_failure=False, notes=""):
    return {"status": "submitted", "version": 3, "no_failure": no_failure, "notes": notes, "labels": list(labels)}


def test_the_same_coding_is_unchanged_whatever_its_version():
    first = snap(label("lossy", rationale="r", evidence=["a.jsonl:3"]))
    now = {**first, "version": 9}
    diff = coding_diff(first, now, NAMES)
    assert diff["unchanged"] and diff["modes"] == [] and diff["no_failure"] is None and diff["notes"] is None


def test_added_and_removed_modes_with_their_episodes():
    first = snap(label("lossy", rationale="the test name was lost"))
    now = snap(label("stale", rationale="the brief was old"), label("stale", 2, rationale="and again"))
    diff = coding_diff(first, now, NAMES)
    assert not diff["unchanged"]
    added, removed = diff["modes"]  # what the coding has now first, then what it dropped
    assert (added["name"], added["change"], [e["instance"] for e in added["episodes"]]) == (
        "Stale Handoff",
        "added",
        [1, 2],
    )
    assert (removed["name"], removed["change"]) == ("Lossy Handoff", "removed")
    assert removed["episodes"][0]["label"]["rationale"] == "the test name was lost"  # what it said is kept


def test_changed_fields_per_episode_and_episodes_added_or_removed():
    first = snap(
        label("lossy", rationale="old", evidence=["a:1"], nearest_rejected="stale"),
        label("lossy", 2, rationale="second"),
        label("merge", rationale="same"),
    )
    now = snap(
        label("lossy", rationale="new", evidence=["a:1", "a:2"], nearest_rejected="merge"),
        label("merge", rationale="same"),
        label("merge", 2, rationale="another one"),
    )
    lossy, merge = coding_diff(first, now, NAMES)["modes"]
    assert lossy["change"] == "changed" and [(e["instance"], e["change"]) for e in lossy["episodes"]] == [
        (1, "changed"),
        (2, "removed"),
    ]
    assert lossy["episodes"][0]["fields"] == [
        {"field": "rationale", "before": "old", "after": "new"},
        {"field": "evidence", "before": "a:1", "after": "a:1, a:2"},
        {"field": "nearest rejected", "before": "Stale Handoff", "after": "Merge after Verification"},
    ]
    assert [(e["instance"], e["change"]) for e in merge["episodes"]] == [(2, "added")]  # episode 1 is the same


def test_no_failure_and_notes():
    diff = coding_diff(snap(no_failure=True, notes=" "), snap(label("lossy", rationale="r"), notes="seen it"), NAMES)
    assert diff["no_failure"] == {"before": True, "after": False}
    assert diff["notes"] == {"before": "", "after": "seen it"}
    assert [m["change"] for m in diff["modes"]] == ["added"]


def test_a_snapshot_from_before_episodes_counts_as_episode_one_and_unknown_codes_keep_their_key():
    old = {"no_failure": False, "notes": "", "labels": [{"code": "lossy", "rationale": "r", "evidence": []}]}
    assert coding_diff(old, snap(label("lossy", rationale="r")), NAMES)["unchanged"]
    assert coding_diff(None, snap(label("gone", rationale="r")))["modes"][0]["name"] == "gone"
