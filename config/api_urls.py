from __future__ import annotations

from django.urls import path

from annotation import api as annotation_api
from taxonomy import api as taxonomy_api
from trajectories import api

urlpatterns = [
    path("runs/", api.RunListAPI.as_view(), name="api-run-list"),
    path("runs/<int:pk>/", api.RunDetailAPI.as_view(), name="api-run-detail"),
    path("runs/<int:pk>/events/", api.RunEventsAPI.as_view(), name="api-run-events"),
    path("imports/", api.ImportCreateAPI.as_view(), name="api-import-create"),
    path("imports/<int:pk>/", api.ImportDetailAPI.as_view(), name="api-import-detail"),
    path("codebooks/", taxonomy_api.CodebookListAPI.as_view(), name="api-codebook-list"),
    path("codebooks/<int:pk>/", taxonomy_api.CodebookDetailAPI.as_view(), name="api-codebook-detail"),
    path("assignments/", annotation_api.MyAssignmentsAPI.as_view(), name="api-my-assignments"),
    path("annotations/<int:assignment_id>/", annotation_api.AnnotationAPI.as_view(), name="api-annotation"),
    path(
        "annotations/<int:assignment_id>/submit/",
        annotation_api.AnnotationSubmitAPI.as_view(),
        name="api-annotation-submit",
    ),
    path(
        "studies/<int:study_id>/exports/<slug:kind>/", annotation_api.StudyExportAPI.as_view(), name="api-study-export"
    ),
]
