"""A run's history in a study, for its adjudicator and admins: every coding change (the
append-only AuditEntry), every step of review (the activity log) and every discussion comment,
in time order. Three queries."""

from __future__ import annotations

import json
from collections import Counter

from activity.models import ActivityEntry

from ..models import AuditEntry, Comment, Study


def run_history(*, study: Study, run_id: int) -> list[dict]:
    rows = []
    audits = (
        AuditEntry.objects.filter(annotation__assignment__study=study, annotation__assignment__run_id=run_id)
        .select_related("actor", "annotation__assignment__annotator")
        .order_by("at", "pk")
    )
    for entry in audits:
        who = entry.actor.get_username() if entry.actor else "—"
        if entry.action == "reassign":
            moved = entry.after or {}
            summary = f"{moved.get('from', '?')}'s draft set aside; {moved.get('to', '?')} codes the run from scratch"
        elif entry.action == "hints":  # the annotator showed the run's failure-signature hints
            shown = [hit.get("detector", "?") for hit in (entry.after or {}).get("hints", [])]
            summary = f"hints shown: {', '.join(shown) if shown else 'no signature found'}"
        else:  # an annotator's own coding (or the study's record loaded for them): the labels as they stood
            summary = f"{entry.action}: {_labels(entry.after)}"
        rows.append(
            {
                "at": entry.at,
                "who": who,
                "kind": "coding",
                "action": entry.action,
                "summary": summary,
                "before": _as_json(entry.before),
                "after": _as_json(entry.after),
            }
        )
    for entry in ActivityEntry.objects.filter(study_id=study.pk, run_id=run_id).select_related("actor"):
        rows.append(
            {
                "at": entry.at,
                "who": entry.actor.get_username() if entry.actor else "automatic",
                "kind": "review",
                "action": entry.action,
                "summary": entry.summary,
                "after": _as_json(entry.detail),
            }
        )
    comments = Comment.objects.filter(discussion__study=study, discussion__run_id=run_id).select_related("author")
    for comment in comments:
        rows.append(
            {
                "at": comment.created_at,
                "who": comment.author.get_username(),
                "kind": "discussion",
                "action": "comment",
                "summary": comment.text,
            }
        )
    return sorted(rows, key=lambda row: row["at"])


def _as_json(state: dict | None) -> str:
    """A recorded state as it is stored (JSON: null, true), for the page's "recorded state"."""
    return json.dumps(state, indent=2, sort_keys=True, ensure_ascii=False) if state else ""


def _labels(snapshot: dict | None) -> str:
    if not snapshot:
        return "—"
    if snapshot.get("no_failure"):
        return "no failure mode"
    episodes = Counter(label.get("code", "?") for label in snapshot.get("labels", []))
    codes = [code if n == 1 else f"{code} ×{n} episodes" for code, n in episodes.items()]
    return ", ".join(codes) if codes else "nothing picked"
