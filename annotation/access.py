"""Who may see a study's summary of everyone's work: its senior adjudicator and admins. Shared by
the dashboard pages and the API; raises 404 for a missing study and 403 for anyone else."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from accounts.roles import is_admin

from .models import Study


def lead_study(user: AbstractBaseUser, study_id: int) -> Study:
    study = get_object_or_404(Study.objects.select_related("codebook", "adjudicator"), pk=study_id)
    if user.pk != study.adjudicator_id and not is_admin(user):
        raise PermissionDenied("Dashboards are for the study's adjudicator and admins.")
    return study
