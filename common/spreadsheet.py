"""CSV cells a spreadsheet would run as formulas (one helper for every CSV writer)."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A text cell that begins with = + - @, a tab or a carriage return gets a leading apostrophe,
    as OWASP recommends; numbers are left alone."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_unsafe(value: str | None) -> str:
    """A cell read back: without the apostrophe `spreadsheet_safe` put before a formula-like text."""
    value = value or ""
    if value.startswith("'") and value[1:].startswith(FORMULA_STARTS):
        return value[1:]
    return value
