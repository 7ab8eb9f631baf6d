from __future__ import annotations

from django.contrib import admin

from .models import AgentSystem, Benchmark, ImportBatch, Run, Task


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["task", "agent", "mode", "source_format", "n_events", "subagents_created", "imported_at"]
    list_filter = ["mode", "agent", "source_format", "task__benchmark"]
    search_fields = ["task__external_id", "source_name"]
    readonly_fields = [f.name for f in Run._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False  # runs come from the importer


@admin.register(ImportBatch)
class ImportBatchAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "source_name",
        "origin",
        "created_by",
        "status",
        "imported",
        "duplicates",
        "failed",
        "created_at",
    ]
    readonly_fields = [f.name for f in ImportBatch._meta.fields]


admin.site.register([Benchmark, Task, AgentSystem])
