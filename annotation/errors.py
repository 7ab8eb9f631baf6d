"""What the annotation rules refuse, raised by services and turned into 409/422 by views and API."""

from __future__ import annotations


class AnnotationError(ValueError):
    """A request the annotation rules refuse; `errors` maps field → message where it helps."""

    def __init__(self, message: str, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.errors = errors or {}


class ConflictError(AnnotationError):
    """A save that named a stale version: someone else saved meanwhile."""


class LockedError(AnnotationError):
    """A change to a submitted annotation outside its run's discussion."""
