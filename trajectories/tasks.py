"""Celery tasks: thin, take ids, call a service, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(bind=True, acks_late=True, max_retries=3)
def import_batch(self, batch_id: int) -> dict:
    batch = services.import_batch_run(batch_id=batch_id)
    return {"batch": batch.pk, "status": batch.status, "imported": batch.imported, "failed": batch.failed}
