"""Keeping a study's statistics current without computing them on a page view.

Every write that changes what they are computed from (a submitted coding, a final label, published
records imported as gold, runs added to the study) calls `statistics_changed`: the study's inputs version goes up in
the same transaction and, once it commits, a refresh is queued for the worker — unless one is
already waiting, so a burst of submissions costs one computation (after PARALLAX_STATISTICS_DELAY_S
seconds, so that the burst can gather). The worker's `statistics_refresh` computes from the current
rows and stores the result with the version it saw; a result is never stored over a newer one."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from ..models import Study, StudyStatistics
from ..selectors.statistics import compute_statistics

logger = logging.getLogger(__name__)
STALE_QUEUE = timedelta(minutes=10)  # a queued refresh not started by then is queued again


def statistics_changed(*, study_id: int) -> None:
    """The study's codings, final labels or analysis settings changed: bump its inputs version and queue a refresh."""
    Study.objects.filter(pk=study_id).update(statistics_version=F("statistics_version") + 1)
    transaction.on_commit(lambda: statistics_request(study_id=study_id))


def statistics_request(*, study_id: int) -> bool:
    """Queue a refresh unless one is already waiting (or was queued so long ago that its message
    was evidently lost). True if this call queued it."""
    from ..tasks import refresh_study_statistics

    now = timezone.now()
    waiting = Q(statistics_queued_at__isnull=True) | Q(statistics_queued_at__lt=now - STALE_QUEUE)
    if not Study.objects.filter(waiting, pk=study_id).update(statistics_queued_at=now):
        return False
    try:
        refresh_study_statistics.apply_async(args=[study_id], countdown=settings.PARALLAX_STATISTICS_DELAY_S)
    except Exception:  # noqa: BLE001 - a broker that is down (or, run eagerly, a failed computation)
        # must not fail the change that asked: it is committed. The figures stay marked not current,
        # and the next change (or "Compute now") asks again.
        logger.exception("statistics of study %s: the refresh could not be queued", study_id)
        Study.objects.filter(pk=study_id).update(statistics_queued_at=None)
        return False
    return True


def statistics_refresh(*, study_id: int) -> StudyStatistics | None:
    """Compute the study's statistics from its current rows and store them, unless what is stored is
    already current. Safe to run twice and concurrently: the stored version only ever goes up."""
    Study.objects.filter(pk=study_id).update(statistics_queued_at=None)  # changes from now on queue anew
    study = Study.objects.select_related("codebook").filter(pk=study_id).first()
    if study is None:
        return None
    stored = StudyStatistics.objects.filter(study=study).defer("payload", "helped").first()
    if stored is not None and stored.version >= study.statistics_version:
        return stored
    start = time.perf_counter()
    payload, helped = compute_statistics(study)
    seconds = time.perf_counter() - start
    fields = {"version": study.statistics_version, "computed_at": timezone.now(), "seconds": seconds,
              "payload": payload, "helped": helped}  # fmt: skip
    with transaction.atomic():
        stored, created = StudyStatistics.objects.select_for_update().get_or_create(study=study, defaults=fields)
        if not created and stored.version < study.statistics_version:
            for name, value in fields.items():
                setattr(stored, name, value)
            stored.save()
    return stored
