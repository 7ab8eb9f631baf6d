"""What free text a person types may hold, one rule for every entry point (HTML forms, htmx saves, the API, the
command line): no NUL character (PostgreSQL text cannot hold one), no lone surrogate (not Unicode; no encoding
can write it), and no more characters than the model field's `max_length` — which the forms state beside the
field and give the browser as `maxlength`. Services call `text_check` on what they store; the apps turn
`TextError` into their own refusal (a 4xx naming the field)."""

from __future__ import annotations

from django.db.models import Model

LONG_TEXT = 20_000  # a comment, a rationale, a note, a definition: several pages of prose
SHORT_TEXT = 200  # a name, an id


class TextError(ValueError):
    """Text a field cannot take; `field` names it, `problem` says why."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def text_check(value: str, *, field: str, max_length: int | None) -> str:
    """`value` when `field` may hold it; else TextError naming the field."""
    if "\x00" in value:
        raise TextError(field, "contains a NUL character, which text cannot hold")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TextError(field, f"contains an invalid character at position {exc.start + 1} (a lone surrogate)") from exc
    if max_length is not None and len(value) > max_length:
        raise TextError(field, f"is {len(value):,} characters long; at most {max_length:,}")
    return value


def model_text(model: type[Model] | Model, name: str, value: str, *, field: str | None = None) -> str:
    """`text_check` with the limit of the model field `name` (as the forms state it)."""
    return text_check(value, field=field or name, max_length=model._meta.get_field(name).max_length)


def limits(request) -> dict:
    """The limits for the templates (a context processor): `maxlength` on every free text, and said beside it."""
    return {"LONG_TEXT": LONG_TEXT, "LONG_TEXT_NOTE": f"up to {LONG_TEXT:,} characters", "SHORT_TEXT": SHORT_TEXT}
