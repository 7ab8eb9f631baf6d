"""Versioned codebooks: category → subcategory → mode codes with definitions.

A frozen codebook never changes (services refuse, and so do `Code.save`/`delete`, the queryset's
bulk `update`/`delete` and the Django admin); edits are made in a new draft version whose `parent` is
the version it came from. Studies pin one frozen version (and move to another only with a key map).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from common.text import LONG_TEXT


class FrozenGuardQuerySet(models.QuerySet):
    """Bulk writes skip `save`/`delete`: they refuse when they would touch a frozen codebook
    (`_refuse_frozen` says which rows would)."""

    def _refuse_frozen(self, verb: str) -> None:
        raise NotImplementedError

    def update(self, **kwargs) -> int:
        self._refuse_frozen("changed")
        return super().update(**kwargs)

    def delete(self):
        self._refuse_frozen("deleted")
        return super().delete()


class CodebookQuerySet(FrozenGuardQuerySet):
    def _refuse_frozen(self, verb: str) -> None:
        frozen = self.filter(status=Codebook.Status.FROZEN).first()
        if frozen is not None:
            raise FrozenCodebookError(f"{frozen} is frozen: a published codebook is never {verb}")


class CodeQuerySet(FrozenGuardQuerySet):
    def _refuse_frozen(self, verb: str) -> None:
        frozen = self.filter(codebook__status=Codebook.Status.FROZEN).select_related("codebook").first()
        if frozen is not None:
            raise FrozenCodebookError(f"{frozen.codebook} is frozen; its codes are never {verb}")


class Codebook(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        FROZEN = "frozen"

    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=6, choices=Status.choices, default=Status.DRAFT)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="The version this one was derived from.",
    )
    description = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    change_log = models.TextField(
        max_length=LONG_TEXT, blank=True, default="", help_text="What changed from the parent version."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    frozen_at = models.DateTimeField(null=True, blank=True)

    objects = CodebookQuerySet.as_manager()

    class Meta:
        ordering = ["name", "-version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="codebook_unique_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        # Frozen means frozen, whoever writes (services, admin, a shell): only the freeze itself, a
        # draft becoming frozen, is a write to a codebook that ends frozen.
        if self.pk is not None and Codebook.objects.filter(pk=self.pk, status=self.Status.FROZEN).exists():
            raise FrozenCodebookError(f"{self} is frozen; make a new version to change it")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if Codebook.objects.filter(pk=self.pk, status=self.Status.FROZEN).exists():
            raise FrozenCodebookError(f"{self} is frozen: a published codebook is never deleted")
        return super().delete(*args, **kwargs)

    @property
    def is_frozen(self) -> bool:
        return self.status == self.Status.FROZEN


class Code(models.Model):
    class Level(models.TextChoices):
        CATEGORY = "category"
        SUBCATEGORY = "subcategory"
        MODE = "mode"

    codebook = models.ForeignKey(Codebook, on_delete=models.CASCADE, related_name="codes")
    level = models.CharField(max_length=11, choices=Level.choices)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    key = models.SlugField(max_length=100, help_text="Stable across versions: labels and exports use it.")
    name = models.CharField(max_length=200)
    definition = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    inclusion = models.TextField(max_length=LONG_TEXT, blank=True, default="", help_text="When to use this code.")
    exclusion = models.TextField(
        max_length=LONG_TEXT, blank=True, default="", help_text="When not to (and what to use instead)."
    )
    positive_example = models.TextField(
        max_length=LONG_TEXT, blank=True, default="", help_text="A case this code fits."
    )
    negative_example = models.TextField(
        max_length=LONG_TEXT, blank=True, default="", help_text="A near case this code does not fit (and why)."
    )
    source = models.TextField(
        max_length=LONG_TEXT,
        blank=True,
        default="",
        help_text="Where the texts come from: 'published: …' (the study's own words, with the file) or 'Parallax'.",
    )
    position = models.PositiveIntegerField(default=0)

    objects = CodeQuerySet.as_manager()

    class Meta:
        ordering = ["codebook", "position"]
        constraints = [
            models.UniqueConstraint(fields=["codebook", "key"], name="code_unique_key"),
            models.CheckConstraint(
                condition=models.Q(level="category", parent__isnull=True)
                | (~models.Q(level="category") & models.Q(parent__isnull=False)),
                name="code_parent_iff_not_category",
            ),
        ]
        indexes = [models.Index(fields=["codebook", "level"])]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # A frozen codebook is a published record: refuse any write, whatever the caller.
        if Codebook.objects.filter(pk=self.codebook_id, status=Codebook.Status.FROZEN).exists():
            raise FrozenCodebookError(f"{self.codebook} is frozen; make a new version to change it")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if Codebook.objects.filter(pk=self.codebook_id, status=Codebook.Status.FROZEN).exists():
            raise FrozenCodebookError(f"{self.codebook} is frozen; its codes are never deleted")
        return super().delete(*args, **kwargs)


class FrozenCodebookError(Exception):
    pass


class OpenDraftError(Exception):
    """A codebook already has a draft being edited: a second one would fork its next version."""

    def __init__(self, draft: Codebook) -> None:
        super().__init__(f"{draft} is a draft still being edited: edit it (or freeze it) before making a new version")
        self.draft = draft
