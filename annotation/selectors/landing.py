"""Where a signed-in person starts: the page of the work that waits for them."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse

from accounts.roles import ANNOTATOR, is_admin, role_names

from ..models import Study


def landing_url(user: AbstractBaseUser) -> str:
    """The adjudicator of any study: the adjudication queue (even an admin: adjudicating is work
    waiting for them, the corpus is not). Admins: the runs. Annotators (the role, or named on a
    study): their queue. Anyone else: the runs, the one page every signed-in person may read."""
    if Study.objects.filter(adjudicator=user).exists():
        return reverse("annotation:adjudication_queue")
    if is_admin(user):
        return reverse("trajectories:run_list")
    if ANNOTATOR in role_names(user) or Study.objects.filter(annotators=user).exists():
        return reverse("annotation:queue")
    return reverse("trajectories:run_list")
