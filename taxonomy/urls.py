from __future__ import annotations

from django.urls import path

from . import views

app_name = "taxonomy"
urlpatterns = [
    path("", views.codebook_list, name="codebook_list"),
    path("import/", views.codebook_import, name="codebook_import"),
    path("<int:codebook_id>/", views.codebook_detail, name="codebook_detail"),
    path("<int:codebook_id>/edit/", views.codebook_edit, name="codebook_edit"),
    path("<int:codebook_id>/export.csv", views.codebook_export, name="codebook_export"),
    path("<int:codebook_id>/new-version/", views.codebook_new_version, name="codebook_new_version"),
    path("<int:codebook_id>/freeze/", views.codebook_freeze, name="codebook_freeze"),
]
