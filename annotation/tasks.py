"""Celery tasks: thin, take ids, call a service, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from .analysis.store import analysis_refresh
from .services.suggestions import suggestions_train


@shared_task(acks_late=True)
def refresh_study_statistics(study_id: int) -> dict:
    stored = analysis_refresh(study_id=study_id)
    return {"study": study_id, "version": stored.version if stored else None}


@shared_task(acks_late=True)
def train_suggestions(model_id: int) -> dict:
    model = suggestions_train(model_id=model_id)
    return {"model": model_id, "status": model.status if model else None}
