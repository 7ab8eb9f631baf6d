"""What changed in a coding since its first submission: two snapshots of it (as
annotation/services/coding.py `snapshot` records them, codes by key) compared mode by mode and, for a
mode in both, episode by episode and field by field. Pure: plain dicts in and out."""

from __future__ import annotations

from collections.abc import Mapping

# The fields of one episode, as a person reads their names (LABEL_FIELDS without the instance).
FIELD_NAMES = {
    "rationale": "rationale",
    "realized_consequence": "realized consequence",
    "evidence": "evidence",
    "contrast": "contrast",
    "spans": "cited spans",
    "nearest_rejected": "nearest rejected",
    "rejection_reason": "why rejected",
    "episode_id": "episode id",
    "comparative_role": "comparative role",
}


def _episodes(snapshot: Mapping | None) -> dict[str, dict[int, dict]]:
    """{mode key: {instance: label}}, in the snapshot's order. A snapshot from before episodes were
    numbered has one episode per mode: instance 1."""
    modes: dict[str, dict[int, dict]] = {}
    for label in (snapshot or {}).get("labels", []):
        modes.setdefault(label.get("code", "?"), {})[label.get("instance") or 1] = label
    return modes


def _item(value) -> str:
    """An anchor, or a cited span as its quote and anchor."""
    return f"“{value.get('quote', '')}” ({value.get('anchor', '')})" if isinstance(value, dict) else str(value)


def _text(name: str, value, names: Mapping[str, str]) -> str:
    if name == "nearest_rejected":
        return names.get(value, value) if value else ""
    if isinstance(value, list):
        return ", ".join(_item(v) for v in value)
    return (value or "").strip() if isinstance(value, str) else str(value or "")


def _field_changes(before: dict, after: dict, names: Mapping[str, str]) -> list[dict]:
    changes = []
    for name, label in FIELD_NAMES.items():
        old, new = _text(name, before.get(name), names), _text(name, after.get(name), names)
        if old != new:
            changes.append({"field": label, "before": old, "after": new})
    return changes


def coding_diff(first: Mapping | None, now: Mapping | None, names: Mapping[str, str] | None = None) -> dict:
    """The changes from `first` to `now`:

    * `no_failure`, `notes`: {"before", "after"} when they changed, else None;
    * `modes`: one entry per mode that changed, the ones in `now` first (in its order), then the ones
      removed: {"code", "name", "change": "added" | "removed" | "changed", "episodes"}; an added or
      removed mode lists its episodes as they stand (now / at first); a changed one lists the episodes
      added, removed or changed ({"instance", "change", "fields": [{"field", "before", "after"}],
      "label"}), a changed episode with the fields that differ;
    * `unchanged`: nothing of the above.
    """
    names = names or {}
    before, after = _episodes(first), _episodes(now)
    modes = []
    for code in [*after, *(code for code in before if code not in after)]:
        entry = {"code": code, "name": names.get(code, code)}
        if code not in before:
            modes.append({**entry, "change": "added", "episodes": _listed(after[code], "added")})
        elif code not in after:
            modes.append({**entry, "change": "removed", "episodes": _listed(before[code], "removed")})
        else:
            episodes = []
            for k in sorted(set(before[code]) | set(after[code])):
                if k not in before[code]:
                    episodes.append({"instance": k, "change": "added", "fields": [], "label": after[code][k]})
                elif k not in after[code]:
                    episodes.append({"instance": k, "change": "removed", "fields": [], "label": before[code][k]})
                elif fields := _field_changes(before[code][k], after[code][k], names):
                    episodes.append({"instance": k, "change": "changed", "fields": fields, "label": after[code][k]})
            if episodes:
                modes.append({**entry, "change": "changed", "episodes": episodes})
    diff = {"modes": modes}
    for name in ("no_failure", "notes"):
        old, new = (first or {}).get(name), (now or {}).get(name)
        if name == "notes":
            old, new = (old or "").strip(), (new or "").strip()
        else:
            old, new = bool(old), bool(new)
        diff[name] = {"before": old, "after": new} if old != new else None
    diff["unchanged"] = not modes and diff["no_failure"] is None and diff["notes"] is None
    return diff


def _listed(episodes: dict[int, dict], change: str) -> list[dict]:
    return [{"instance": k, "change": change, "fields": [], "label": label} for k, label in sorted(episodes.items())]
