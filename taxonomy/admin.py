from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import ActionLocation

from .models import Code, Codebook

# A frozen codebook and its codes are shown, never changed or deleted, here as everywhere (the
# model and its querysets refuse too). The bulk "delete selected" action is left out: it deletes
# with one query, past each object's delete permission.


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

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        actions = super().get_actions(request, action_location)
        actions.pop("delete_selected", None)
        return actions

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and not (obj is not None and obj.is_frozen)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.is_frozen)


@admin.register(Code)
class CodeAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "level", "codebook"]
    list_filter = ["codebook", "level"]

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        actions = super().get_actions(request, action_location)
        actions.pop("delete_selected", None)
        return actions

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # A new code (or a moved one) goes into a draft only.
        if db_field.name == "codebook":
            kwargs["queryset"] = Codebook.objects.filter(status=Codebook.Status.DRAFT)
        elif db_field.name == "parent":
            kwargs["queryset"] = Code.objects.filter(codebook__status=Codebook.Status.DRAFT)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and not (obj is not None and obj.codebook.is_frozen)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.codebook.is_frozen)
