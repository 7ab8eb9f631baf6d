from __future__ import annotations

from django.urls import path

from . import views

app_name = "trajectories"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/timeline/", views.run_timeline, name="run_timeline"),
    path("runs/<int:run_id>/contexts/", views.run_contexts, name="run_contexts"),
    path("runs/<int:run_id>/contexts/<int:context_id>/events/", views.context_events, name="context_events"),
    path("runs/<int:run_id>/files/<int:file_id>/", views.run_file, name="run_file"),
    path("runs/<int:run_id>/anchor/", views.pair_anchor, name="pair_anchor"),
    path("metrics.csv", views.metrics_csv, name="metrics_csv"),
    path("tests.csv", views.tests_csv, name="tests_csv"),
    path("imports/", views.import_upload, name="import_upload"),
    path("imports/<int:batch_id>/", views.import_detail, name="import_detail"),
]
