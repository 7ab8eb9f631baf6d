"""A study's analysis settings (pure; docs/agreement.md): κ's code universe, and RQ4's selection
rules and mechanism tags. Stored on the Study as plain JSON; read and validated here, so that a bad
value is refused with the field it is in before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields

from .analysis.reports import DEFAULT_RQ4_RULES, Rq4Rules

CODE_UNIVERSES = {
    "codebook": "all codes of the codebook",
    "observed": "codes observed in the study's independent codings",
}
DEFAULT_CODE_UNIVERSE = "codebook"

# The study's mechanisms (key, label): the tags of a pair where concurrency helped.
DEFAULT_MECHANISMS: tuple[tuple[str, str], ...] = (
    ("complementary", "complementary work"),
    ("alternatives", "alternative-solution selection"),
    ("verification", "independent verification"),
    ("other", "other"),
    ("none", "no real advantage (noise)"),
)
MECHANISM_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
MAX_MECHANISMS, MAX_LABEL = 20, 100


class SettingsError(ValueError):
    """A bad setting, with the field it is in."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def rq4_rules(data: Mapping | None) -> Rq4Rules:
    """RQ4's rules from their stored JSON (missing keys: the defaults); SettingsError names the field."""
    data = dict(data or {})
    unknown = sorted(set(data) - {f.name for f in fields(Rq4Rules)})
    if unknown:
        raise SettingsError(unknown[0], "not a setting of RQ4's rules")
    values = {}
    for f in fields(Rq4Rules):
        value = data.get(f.name, getattr(DEFAULT_RQ4_RULES, f.name))
        if isinstance(getattr(DEFAULT_RQ4_RULES, f.name), bool):
            if not isinstance(value, bool):
                raise SettingsError(f.name, f"must be true or false, got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SettingsError(f.name, f"must be a number, got {value!r}")
            value = float(value)
        values[f.name] = value
    if not 0 <= values["test_pass_margin"] < 1:
        raise SettingsError("test_pass_margin", "must be at least 0 and below 1 (a difference of test pass rates)")
    if values["faster_min_seconds"] < 0:
        raise SettingsError("faster_min_seconds", "must be 0 or more seconds")
    if not 0 <= values["faster_min_fraction"] < 1:
        raise SettingsError("faster_min_fraction", "must be at least 0 and below 1 (0.2 = 20% faster)")
    if not (values["higher_test_pass"] or values["solved_only_concurrently"] or values["faster"]):
        raise SettingsError("higher_test_pass", "at least one rule must be enabled")
    return Rq4Rules(**values)


def mechanisms(data: object) -> list[tuple[str, str]]:
    """The mechanism tags from their stored JSON ([[key, label], ...]; None: the defaults)."""
    if data is None:
        return list(DEFAULT_MECHANISMS)
    if not isinstance(data, list) or not data:
        raise SettingsError("mechanisms", "must be a non-empty list of [key, label]")
    if len(data) > MAX_MECHANISMS:
        raise SettingsError("mechanisms", f"at most {MAX_MECHANISMS} tags, got {len(data)}")
    out: list[tuple[str, str]] = []
    for number, item in enumerate(data, start=1):
        if not (isinstance(item, list | tuple) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise SettingsError("mechanisms", f"tag {number}: must be a key and a label")
        key, label = item[0].strip(), item[1].strip()
        if not MECHANISM_KEY.match(key):
            raise SettingsError(
                "mechanisms",
                f"tag {number}: key {key!r} must be 1–40 lower-case letters, digits, '-' or '_', starting with a "
                "letter or digit",
            )
        if not label or len(label) > MAX_LABEL:
            raise SettingsError("mechanisms", f"tag {number} ({key}): the label must be 1–{MAX_LABEL} characters")
        if key in {k for k, _ in out}:
            raise SettingsError("mechanisms", f"tag {number}: key {key!r} is given twice")
        out.append((key, label))
    return out


def parse_mechanisms(text: str) -> list[tuple[str, str]]:
    """Tags typed one per line as `key: label` (a line with only a key uses it as its label)."""
    items = []
    for line in text.splitlines():
        if line.strip():
            key, _, label = line.partition(":")
            items.append([key.strip(), label.strip() or key.strip()])
    if not items:
        raise SettingsError("mechanisms", "give at least one tag, one per line as 'key: label'")
    return mechanisms(items)


def format_mechanisms(tags: list[tuple[str, str]]) -> str:
    return "\n".join(f"{key}: {label}" for key, label in tags)


def rq4_settings(data: Mapping | None) -> tuple[Rq4Rules, list[tuple[str, str]]]:
    """A study's stored RQ4 settings ({"rules": {...}, "mechanisms": [[key, label], ...]}; {} for
    the defaults), validated."""
    data = dict(data or {})
    unknown = sorted(set(data) - {"rules", "mechanisms"})
    if unknown:
        raise SettingsError(unknown[0], "not an RQ4 setting")
    return rq4_rules(data.get("rules")), mechanisms(data.get("mechanisms"))


def code_universe(value: str) -> str:
    if value not in CODE_UNIVERSES:
        raise SettingsError("kappa_universe", f"must be one of {', '.join(CODE_UNIVERSES)}, got {value!r}")
    return value
