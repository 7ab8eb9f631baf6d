from __future__ import annotations

from django.contrib import admin

from .models import ActivityEntry


@admin.register(ActivityEntry)
class ActivityEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "action", "actor", "study_id", "run_id", "summary"]
    list_filter = ["action"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
