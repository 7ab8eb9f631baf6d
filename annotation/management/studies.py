"""What the study commands share."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotation.models import Study


def study_from_ref(ref: str) -> Study:
    """The study a command names, by id or by name; a CommandError naming the reference if none."""
    study = Study.objects.filter(pk=int(ref)).first() if ref.isdigit() else Study.objects.filter(name=ref).first()
    if study is None:
        raise CommandError(f"no study {ref!r}")
    return study
