from __future__ import annotations

from django.contrib import admin

from .models import Code, Codebook


class CodeInline(admin.TabularInline):
    model = Code
    fields = ["position", "level", "key", "name", "parent", "definition"]
    extra = 0
    show_change_link = True

    def has_change_permission(self, request, obj=None) -> bool:
        return obj is None or not obj.is_frozen

    has_add_permission = has_delete_permission = has_change_permission


@admin.register(Codebook)
class CodebookAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "status", "parent", "created_at"]
    list_filter = ["status"]
    readonly_fields = ["status", "frozen_at", "created_at", "created_by"]
    inlines = [CodeInline]

    # A frozen codebook is shown, never changed or deleted (the model refuses too).
    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and not (obj is not None and obj.is_frozen)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.is_frozen)


@admin.register(Code)
class CodeAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "level", "codebook"]
    list_filter = ["codebook", "level"]

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and not (obj is not None and obj.codebook.is_frozen)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.codebook.is_frozen)
