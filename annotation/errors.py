"""What the annotation rules refuse, raised by services and turned into 409/422 by views and API."""

from __future__ import annotations

from django.db.models import Model

from common.text import TextError, model_text


class AnnotationError(ValueError):
    """A request the annotation rules refuse; `errors` maps field → message where it helps."""

    def __init__(self, message: str, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.errors = errors or {}


class ConflictError(AnnotationError):
    """A save that named a stale version: someone else saved meanwhile."""


class LockedError(AnnotationError):
    """A change to a submitted annotation outside its run's discussion."""


def checked_text(model: type[Model], name: str, value: str, *, field: str | None = None) -> str:
    """`value` if the model field `name` may hold it (common.text: no NUL, no lone surrogate, within its
    max_length); else AnnotationError naming `field` (the form's name for it, `name` by default)."""
    try:
        return model_text(model, name, value, field=field)
    except TextError as exc:
        raise AnnotationError(str(exc), {exc.field: exc.problem}) from exc
