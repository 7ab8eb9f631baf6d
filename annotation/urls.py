from __future__ import annotations

from django.urls import path

from . import dashboard_views, discussion_views, pilot_views, views

app_name = "annotation"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("next/", views.next_run, name="next"),
    path("<int:assignment_id>/", views.annotate, name="annotate"),
    path("<int:assignment_id>/save/", views.save, name="save"),
    path("<int:assignment_id>/submit/", views.submit, name="submit"),
    path("<int:assignment_id>/revise/", views.revise, name="revise"),
    path("discussions/", discussion_views.discussion_list, name="discussions"),
    path("discussions/<int:discussion_id>/", discussion_views.discussion_detail, name="discussion"),
    path("discussions/<int:discussion_id>/comment/", discussion_views.discussion_comment, name="discussion_comment"),
    path("discussions/<int:discussion_id>/resolve/", discussion_views.discussion_resolve, name="discussion_resolve"),
    path("adjudication/", discussion_views.adjudication_queue, name="adjudication_queue"),
    path("adjudication/<int:discussion_id>/", discussion_views.adjudicate, name="adjudicate"),
    path("studies/", dashboard_views.study_list, name="studies"),
    path("studies/<int:study_id>/", dashboard_views.study_dashboard, name="dashboard"),
    path("studies/<int:study_id>/advantage/", dashboard_views.advantage, name="advantage"),
    path("studies/<int:study_id>/advantage/<int:run_id>/", dashboard_views.advantage_tag, name="advantage_tag"),
    path("studies/<int:study_id>/export/<slug:kind>.csv", dashboard_views.study_export, name="export"),
    path("pilot/<int:pilot_id>/", pilot_views.pilot_home, name="pilot_home"),
    path("pilot/<int:pilot_id>/runs/<int:run_id>/", pilot_views.pilot_run, name="pilot_run"),
    path("pilot/<int:pilot_id>/consolidate/", pilot_views.pilot_consolidate, name="pilot_consolidate"),
    path("pilot/<int:pilot_id>/promote/", pilot_views.pilot_promote_view, name="pilot_promote"),
]
