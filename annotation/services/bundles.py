"""The reproducibility bundle, built by the worker: a request asks for one (bundle_request), the worker
builds it to disk from the stored analysis (bundle_build) reporting each file it writes, and the page
offers the newest finished one for download. A request never builds it: a study ten times the paper's
takes seconds to write, and a download must not depend on the web server's timeout."""

from __future__ import annotations

import time
from contextlib import suppress
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from activity.services import record

from ..analysis.store import analysis_refresh
from ..models import Study, StudyBundle
from ..selectors.bundle import bundle_directory, write_bundle

STALE_PENDING = timedelta(minutes=10)  # a request not started by then is taken as lost: another may be made
STALE_RUNNING = timedelta(minutes=30)
KEEP = 3  # finished bundles kept per study (older files are deleted)


def bundle_request(*, study: Study, actor: AbstractBaseUser | None, queue: bool = True) -> StudyBundle:
    """Ask the worker for a bundle of the study; the one already being built if there is one."""
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()  # one request at a time per study
        now = timezone.now()
        busy = (
            StudyBundle.objects.filter(study=study)
            .filter(
                Q(status=StudyBundle.Status.PENDING, created_at__gte=now - STALE_PENDING)
                | Q(status=StudyBundle.Status.RUNNING, started_at__gte=now - STALE_RUNNING)
            )
            .first()
        )
        if busy is not None:
            return busy
        bundle = StudyBundle.objects.create(study=study, created_by=actor)
        record("study.bundle", "reproducibility bundle asked for", actor=actor, study_id=study.pk, bundle=bundle.pk)
        if queue:
            transaction.on_commit(lambda: _enqueue(bundle.pk))
    return bundle


def _enqueue(bundle_id: int) -> None:
    from ..tasks import build_study_bundle

    build_study_bundle.delay(bundle_id)


def bundle_build(*, bundle_id: int) -> StudyBundle | None:
    """Build a pending bundle (the worker calls this): make the study's statistics current, then write
    the zip next to its final place and move it there when complete, so that a download never sees a
    half-written file. Safe to run twice: a bundle already running, done or failed is left as it is."""
    claimed = StudyBundle.objects.filter(pk=bundle_id, status=StudyBundle.Status.PENDING).update(
        status=StudyBundle.Status.RUNNING, started_at=timezone.now()
    )
    bundle = StudyBundle.objects.select_related("study").filter(pk=bundle_id).first()
    if bundle is None or not claimed:
        return bundle
    start = time.perf_counter()
    directory = bundle_directory(bundle.study_id)
    final = directory / f"bundle-{bundle.pk}.zip"
    partial = final.with_suffix(".zip.part")

    def progress(done: int, total: int) -> None:
        StudyBundle.objects.filter(pk=bundle_id).update(steps_done=done, steps_total=total)

    try:
        analysis_refresh(study_id=bundle.study_id)  # the figures it carries are those of the study now
        directory.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            version = write_bundle(bundle.study, out, progress=progress)
        partial.replace(final)
    except (OperationalError, InterfaceError):
        # The database went away: the task is retried (annotation/tasks.py), so the bundle waits again.
        partial.unlink(missing_ok=True)
        with suppress(OperationalError, InterfaceError):
            StudyBundle.objects.filter(pk=bundle_id).update(status=StudyBundle.Status.PENDING, started_at=None)
        raise
    except Exception as exc:
        partial.unlink(missing_ok=True)
        StudyBundle.objects.filter(pk=bundle_id).update(
            status=StudyBundle.Status.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
        raise
    StudyBundle.objects.filter(pk=bundle_id).update(
        status=StudyBundle.Status.DONE,
        finished_at=timezone.now(),
        version=version,
        path=str(final.relative_to(settings.MEDIA_ROOT)),
        size=final.stat().st_size,
        seconds=time.perf_counter() - start,
    )
    _prune(bundle.study_id)
    return StudyBundle.objects.get(pk=bundle_id)


def _prune(study_id: int) -> None:
    """Delete the files of all but the newest KEEP finished bundles of the study (their rows stay, said gone)."""
    old = StudyBundle.objects.filter(study_id=study_id, status=StudyBundle.Status.DONE).exclude(path="")[KEEP:]
    for bundle in old:
        (Path(settings.MEDIA_ROOT) / bundle.path).unlink(missing_ok=True)
        StudyBundle.objects.filter(pk=bundle.pk).update(path="")
