from __future__ import annotations

from django.urls import path

from . import views

app_name = "annotation"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("next/", views.next_run, name="next"),
    path("<int:assignment_id>/", views.annotate, name="annotate"),
    path("<int:assignment_id>/save/", views.save, name="save"),
    path("<int:assignment_id>/submit/", views.submit, name="submit"),
]
