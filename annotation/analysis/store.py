"""Keeping a study's analysis current without computing it on a page view, and reading it back.

Every write that changes what it is computed from (a submitted coding, a final label, published
records imported as gold, runs added to the study or read again, analysis settings) calls
`analysis_changed`: the study's inputs version goes up in the same transaction and, once it commits, a
refresh is queued for the worker — unless one is already waiting, so a burst of submissions costs one
computation (after PARALLAX_STATISTICS_DELAY_S seconds, so that the burst can gather). The worker's
`analysis_refresh` reads the inputs once, computes the document and stores it with the version it
saw; a document is never stored over a newer one. The study waits for its refresh until one finishes; one
lost on the way (a worker killed mid-task) is queued again by the worker's sweep (`analysis_sweep`).
`stored_analysis` reads the last one back and says whether it is current."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from ..models import Study, StudyStatistics
from . import compute as sections
from .compute import compute
from .document import StudyAnalysis
from .inputs import read_inputs
from .reports import outcome_comparison, process_summary

logger = logging.getLogger(__name__)


def stale_queue() -> timedelta:
    """A refresh queued (or started) this long ago and not finished was lost — its message, or the worker that ran
    it: it is queued again, by the next change or by the worker's sweep (`analysis_sweep`, every
    PARALLAX_STATISTICS_SWEEP_S). PARALLAX_STATISTICS_STALE_S, two minutes unless set: the 10× study's refresh takes
    under 6 s (docs/performance.md)."""
    return timedelta(seconds=settings.PARALLAX_STATISTICS_STALE_S)


def analysis_changed(*, study_id: int) -> None:
    """The study's codings, final labels, runs or analysis settings changed: bump its inputs version and
    queue a refresh."""
    Study.objects.filter(pk=study_id).update(statistics_version=F("statistics_version") + 1)
    transaction.on_commit(lambda: analysis_request(study_id=study_id))


def analysis_request(*, study_id: int) -> bool:
    """Queue a refresh unless one is already waiting (or was queued so long ago that its message
    was evidently lost). True if this call queued it."""
    from ..tasks import refresh_study_statistics

    now = timezone.now()
    waiting = Q(statistics_queued_at__isnull=True) | Q(statistics_queued_at__lt=now - stale_queue())
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


def analysis_refresh(*, study_id: int) -> StudyStatistics | None:
    """Compute the study's analysis from its current rows and store it, unless what is stored is
    already current. Safe to run twice and concurrently: the stored version only ever goes up."""
    study = Study.objects.select_related("codebook").filter(pk=study_id).first()
    if study is None:
        return None
    stored = StudyStatistics.objects.filter(study=study).defer("payload", "helped").first()
    if stored is not None and stored.version >= study.statistics_version:
        _refresh_done(study_id, stored.version)
        return stored
    # Which computation was under way, should the worker die during it.
    logger.info("statistics of study %s: computing version %s", study_id, study.statistics_version)
    start = time.perf_counter()
    document = compute(read_inputs(study))
    seconds = time.perf_counter() - start
    fields = {"version": study.statistics_version, "computed_at": timezone.now(), "seconds": seconds,
              "payload": document.payload(), "helped": document.helped}  # fmt: skip
    with transaction.atomic():
        stored, created = StudyStatistics.objects.select_for_update().get_or_create(study=study, defaults=fields)
        if not created and stored.version < study.statistics_version:
            for name, value in fields.items():
                setattr(stored, name, value)
            stored.save()
    _refresh_done(study_id, study.statistics_version)
    logger.info("statistics of study %s: version %s stored (%.1f s)", study_id, study.statistics_version, seconds)
    return stored


def _refresh_done(study_id: int, computed: int) -> None:
    """The refresh is over: the study is no longer waiting for one (a refresh that died on the way keeps it
    waiting, and the sweep asks again once that is stale_queue() old) — unless it changed meanwhile: asked again."""
    Study.objects.filter(pk=study_id).update(statistics_queued_at=None)
    if Study.objects.filter(pk=study_id, statistics_version__gt=computed).exists():
        analysis_request(study_id=study_id)


def analysis_sweep() -> list[int]:
    """Queue a refresh of every study whose figures are behind its inputs with none waiting — or one that waits
    since stale_queue() (a worker killed mid-refresh, a message lost): the worker's beat runs this every
    PARALLAX_STATISTICS_SWEEP_S (CELERY_BEAT_SCHEDULE), so the figures become current again without a person.
    The studies queued."""
    now = timezone.now()
    behind = Study.objects.filter(
        Q(statistics__isnull=True) | Q(statistics__version__lt=F("statistics_version")),
        Q(statistics_queued_at__isnull=True) | Q(statistics_queued_at__lt=now - stale_queue()),
    )
    queued = [study_id for study_id in behind.values_list("pk", flat=True) if analysis_request(study_id=study_id)]
    if queued:
        logger.warning("statistics behind with no refresh under way (lost or never queued), queued again: %s", queued)
    return queued


@dataclass(frozen=True)
class Stored:
    """The stored analysis of a study and whether it is current."""

    statistics: StudyStatistics | None
    version: int  # the study's current inputs version
    queued: bool  # a refresh is waiting for the worker

    @property
    def document(self) -> StudyAnalysis | None:
        if self.statistics is None or "payload" in self.statistics.get_deferred_fields():
            return None
        helped = None if "helped" in self.statistics.get_deferred_fields() else self.statistics.helped
        return StudyAnalysis.from_stored(self.statistics.payload, helped)

    @property
    def current(self) -> bool:
        """Computed from the study's latest inputs."""
        return self.statistics is not None and self.statistics.version >= self.version

    @property
    def helped(self) -> list[list]:
        return self.statistics.helped if self.statistics is not None else []


def stored_analysis(study: Study, *, read: tuple[str, ...] = ("payload",)) -> Stored:
    """The last analysis computed for the study — of its two stored parts, only those in `read`
    (`payload`, `helped`) — and the study's inputs version read fresh (not from a possibly older
    instance). Two queries."""
    qs = StudyStatistics.objects.filter(study_id=study.pk).defer(*({"payload", "helped"} - set(read)))
    version, queued_at = (
        Study.objects.filter(pk=study.pk).values_list("statistics_version", "statistics_queued_at").get()
    )
    return Stored(statistics=qs.first(), version=version, queued=queued_at is not None)


class NotComputed(Exception):
    """The study's analysis has not been computed yet (or was stored before this section existed)."""


def stored_section(study: Study, name: str):
    """One section of the study's analysis as the worker stored it, and the `Stored` it came from (its
    version, whether it is current) — never computed in the request: pages and exports answer at once
    however large the study, and say whether the figures are current. A refresh is asked for when they
    are not (a no-op when one is waiting). NotComputed when there is nothing stored to give."""
    stored = stored_analysis(study, read=("payload", "helped") if name == "helped" else ("payload",))
    document = stored.document
    if document is None or name in document.missing:
        analysis_request(study_id=study.pk)
        raise NotComputed(
            f"the statistics of {study} are not computed yet: the worker has been asked; try again in a moment"
        )
    if not stored.current:
        analysis_request(study_id=study.pk)
    return getattr(document, name), stored


# What each section of the document is computed from (inputs.read_inputs's parts).
SECTION_PARTS = {
    "agreement": ("agreement",),
    "by_version": ("versions",),
    "table3": ("table3",),
    "rq1": ("pairs",),
    "rq2": ("metrics",),
    "signatures": ("signatures",),
    "helped": ("pairs",),
}


def analysis_section(study: Study, name: str):
    """One section of the study's analysis as the command line gives it: the stored document's when it
    is current; else computed now from the inputs that section needs (the headline κ without its
    bootstrap: the CI is the worker's). Requests never compute: they read `stored_section`."""
    stored = stored_analysis(study, read=("payload", "helped") if name == "helped" else ("payload",))
    document = stored.document if stored.current else None
    if document is not None and name not in document.missing:
        return getattr(document, name)
    inputs = read_inputs(study, parts=SECTION_PARTS[name])
    if name == "agreement":
        return sections.agreement(inputs, resamples=0)
    if name == "by_version":
        return sections.kappa_by_version(inputs, resamples=0)
    if name == "rq1":
        return outcome_comparison(inputs.pairs)
    if name == "rq2":
        return process_summary(inputs.metrics)
    if name == "helped":
        return sections.helped_pairs(inputs)
    return {"table3": sections.table3, "signatures": sections.signatures}[name](inputs)
