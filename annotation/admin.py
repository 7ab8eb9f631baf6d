from __future__ import annotations

from django.contrib import admin

from .models import Annotation, Assignment, AuditEntry, FinalCoding, OpenCode, PilotRound, Study


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "codebook", "adjudicator", "created_at"]
    filter_horizontal = ["annotators"]
    raw_id_fields = ["runs"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Coding data changes only through the services (blinding, locking and audit live there)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["study", "run", "annotator", "slot"]
    list_filter = ["study", "annotator"]


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = ["assignment", "status", "version", "no_failure", "updated_at"]
    list_filter = ["status"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["annotation", "action", "actor", "at"]


@admin.register(FinalCoding)
class FinalCodingAdmin(ReadOnlyAdmin):
    list_display = ["study", "run", "provenance", "decided_by", "decided_at"]


@admin.register(PilotRound)
class PilotRoundAdmin(admin.ModelAdmin):
    list_display = ["name", "base_codebook", "result_codebook", "created_at"]
    filter_horizontal = ["annotators"]
    raw_id_fields = ["runs"]


@admin.register(OpenCode)
class OpenCodeAdmin(ReadOnlyAdmin):
    list_display = ["text", "pilot", "run", "annotator", "promoted_to"]
