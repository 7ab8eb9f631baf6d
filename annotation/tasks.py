"""Celery tasks: thin, take ids, call a service, safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .analysis.store import analysis_refresh, analysis_sweep
from .services.bundles import bundle_build
from .services.suggestions import suggestions_train

# A database that went away mid-task (a restart, a failover) is a reason to try again, not to lose the
# refresh: retried with backoff (2, 4, 8 … s, at most a minute apart), eight times.
DATABASE_GONE = (OperationalError, InterfaceError)


@shared_task(
    acks_late=True,
    autoretry_for=DATABASE_GONE,
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=False,
    max_retries=8,
)
def refresh_study_statistics(study_id: int) -> dict:
    stored = analysis_refresh(study_id=study_id)
    return {"study": study_id, "version": stored.version if stored else None}


@shared_task
def sweep_statistics() -> list[int]:
    """Every minute (CELERY_BEAT_SCHEDULE): the studies whose figures are behind and nobody is computing."""
    return analysis_sweep()


@shared_task(acks_late=True)
def train_suggestions(model_id: int) -> dict:
    model = suggestions_train(model_id=model_id)
    return {"model": model_id, "status": model.status if model else None}


@shared_task(acks_late=True, autoretry_for=DATABASE_GONE, retry_backoff=2, retry_backoff_max=60, retry_jitter=False,
             max_retries=8)  # fmt: skip
def build_study_bundle(bundle_id: int) -> dict:
    bundle = bundle_build(bundle_id=bundle_id)
    return {"bundle": bundle_id, "status": bundle.status if bundle else None}
