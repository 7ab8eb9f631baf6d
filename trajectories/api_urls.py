from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("runs/", api.RunListAPI.as_view(), name="api-run-list"),
    path("runs/<int:pk>/", api.RunDetailAPI.as_view(), name="api-run-detail"),
    path("runs/<int:pk>/events/", api.RunEventsAPI.as_view(), name="api-run-events"),
    path("imports/", api.ImportCreateAPI.as_view(), name="api-import-create"),
    path("imports/<int:pk>/", api.ImportDetailAPI.as_view(), name="api-import-detail"),
]
