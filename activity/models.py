"""The study's activity log: what changed the research record besides an annotator's own coding
(which annotation.AuditEntry keeps) — studies created and edited, assignments and reassignments,
agreements, discussions, consensus, adjudication, published records loaded, imports, codebook
versions and freezes.

Append-only, like the coding history: the model refuses to change or delete an entry and, on
PostgreSQL, a trigger refuses UPDATE and DELETE (migration 0001). It sits below every other app
(ids, not foreign keys, name what an entry is about), so that each may write to it and nothing
that is deleted elsewhere can take an entry with it."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ActivityEntry(models.Model):
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(max_length=40, help_text="e.g. study.create, final.adjudicated, codebook.freeze")
    study_id = models.IntegerField(null=True, blank=True, db_index=True)
    run_id = models.IntegerField(null=True, blank=True)
    codebook_id = models.IntegerField(null=True, blank=True)
    batch_id = models.IntegerField(null=True, blank=True)
    summary = models.TextField(help_text="One line a person reads.")
    detail = models.JSONField(default=dict, blank=True, help_text="Everything else, as recorded.")

    class Meta:
        ordering = ["at", "pk"]
        verbose_name_plural = "activity entries"
        indexes = [models.Index(fields=["study_id", "run_id"])]

    def __str__(self) -> str:
        return f"{self.action} at {self.at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("activity entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("activity entries are append-only")
