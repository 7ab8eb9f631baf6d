from __future__ import annotations

from django.contrib import admin

from activity.services import record

from .models import Annotation, Assignment, AuditEntry, FinalCoding, OpenCode, PilotRound, Study, StudyCodebookMove


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    """Name and adjudicator only: a study is created, and its design (annotators, k, seed, runs,
    closing) changed, on its design page (Studies → New study / design), whose services keep the
    assignment balanced and record every change; its analysis settings on its settings page (validated,
    and the statistics are recomputed); its codebook moves to another version only with a key map
    (the study's codebook page)."""

    list_display = ["name", "codebook", "coders_per_run", "adjudicator", "closed_at", "created_at"]
    fields = ["name", "adjudicator", "codebook", "annotators", "coders_per_run", "seed", "closed_at",
              "kappa_universe", "rq4_settings", "statistics_version", "created_at", "created_by"]  # fmt: skip
    readonly_fields = ["codebook", "annotators", "coders_per_run", "seed", "closed_at", "kappa_universe",
                       "rq4_settings", "statistics_version", "created_at", "created_by"]  # fmt: skip

    def has_add_permission(self, request) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        # what each changed field was, read before the save: the log keeps both sides of an edit
        stored = type(obj).objects.filter(pk=obj.pk).first() if change else None
        before = {name: str(getattr(stored, name)) for name in form.changed_data} if stored else {}
        super().save_model(request, obj, form, change)
        changed = {name: str(form.cleaned_data.get(name)) for name in form.changed_data}
        verb = "edited in the admin" if change else "created in the admin"
        record("study.edit" if change else "study.create", f"study {obj.name!r} {verb}: {', '.join(changed) or '-'}",
               actor=request.user, study_id=obj.pk, changed=changed, before=before)  # fmt: skip

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "adjudicator":
            from .selectors.studies import adjudicator_choices

            kwargs["queryset"] = adjudicator_choices()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


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


@admin.register(StudyCodebookMove)
class StudyCodebookMoveAdmin(ReadOnlyAdmin):
    list_display = ["study", "from_codebook", "to_codebook", "actor", "at", "mapped_labels", "reopened"]
