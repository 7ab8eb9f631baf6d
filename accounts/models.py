from __future__ import annotations

from django.db import models


class LoginFailure(models.Model):
    """The login throttle's counters when the cache (Redis) does not answer: kept in the database instead, so a
    login neither fails nor goes unthrottled while Redis is away (accounts/throttle.py)."""

    key = models.CharField(max_length=300, unique=True)
    count = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.count}"
