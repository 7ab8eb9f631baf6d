from __future__ import annotations

from django.urls import path

from .views import bundles, codebook, coding, dashboard, pilot, review, studies, suggestions

app_name = "annotation"
urlpatterns = [
    path("", coding.queue, name="queue"),
    path("next/", coding.next_run, name="next"),
    path("<int:assignment_id>/", coding.annotate, name="annotate"),
    path("<int:assignment_id>/save/", coding.save, name="save"),
    path("<int:assignment_id>/submit/", coding.submit, name="submit"),
    path("<int:assignment_id>/hints/", coding.hints, name="hints"),
    path("<int:assignment_id>/revise/", coding.revise, name="revise"),
    path("<int:assignment_id>/skip/", coding.skip, name="skip"),
    path("discussions/", review.discussion_list, name="discussions"),
    path("discussions/<int:discussion_id>/", review.discussion_detail, name="discussion"),
    path("discussions/<int:discussion_id>/comment/", review.discussion_comment, name="discussion_comment"),
    path("discussions/<int:discussion_id>/resolve/", review.discussion_resolve, name="discussion_resolve"),
    path("adjudication/", review.adjudication_queue, name="adjudication_queue"),
    path("adjudication/<int:discussion_id>/", review.adjudicate, name="adjudicate"),
    path("studies/", dashboard.study_list, name="studies"),
    path("studies/new/", studies.study_new, name="study_new"),
    path("studies/<int:study_id>/", dashboard.study_dashboard, name="dashboard"),
    path("studies/<int:study_id>/manage/", studies.study_manage, name="study_manage"),
    path("studies/<int:study_id>/manage/change/", studies.study_manage_action, name="study_manage_action"),
    # RQ4 in the paper: the pairs where concurrency helped, to tag with a mechanism
    path("studies/<int:study_id>/statistics/", dashboard.statistics_status, name="statistics_status"),
    path("studies/<int:study_id>/statistics/refresh/", dashboard.statistics_refresh, name="statistics_refresh"),
    path("studies/<int:study_id>/advantage/", dashboard.helped_pairs, name="helped_pairs"),
    path("studies/<int:study_id>/advantage/<int:run_id>/", dashboard.helped_pair_tag, name="helped_pair_tag"),
    path("studies/<int:study_id>/settings/", dashboard.analysis_settings, name="analysis_settings"),
    path("studies/<int:study_id>/suggestions/", suggestions.suggestions, name="suggestions"),
    path("studies/<int:study_id>/suggestions/train/", suggestions.suggestions_train, name="suggestions_train"),
    path("studies/<int:study_id>/suggestions/status/", suggestions.suggestions_status, name="suggestions_status"),
    path(
        "studies/<int:study_id>/suggestions/queue-order/",
        suggestions.suggestions_queue_order,
        name="suggestions_queue_order",
    ),
    path("studies/<int:study_id>/codebook/", codebook.study_codebook, name="study_codebook"),
    path("studies/<int:study_id>/export/<slug:kind>.csv", dashboard.study_export, name="export"),
    path("studies/<int:study_id>/bundle.zip", bundles.bundle_download, name="bundle"),
    path("studies/<int:study_id>/bundle/build/", bundles.bundle_build, name="bundle_build"),
    path("studies/<int:study_id>/bundle/status/", bundles.bundle_status, name="bundle_status"),
    path("studies/<int:study_id>/runs/<int:run_id>/history/", dashboard.run_history, name="run_history"),
    path(
        "studies/<int:study_id>/runs/<int:run_id>/published/<int:record_id>/",
        dashboard.published_file,
        name="published_file",
    ),
    path("pilot/<int:pilot_id>/", pilot.pilot_home, name="pilot_home"),
    path("pilot/<int:pilot_id>/runs/<int:run_id>/", pilot.pilot_run, name="pilot_run"),
    path("pilot/<int:pilot_id>/consolidate/", pilot.pilot_consolidate, name="pilot_consolidate"),
    path("pilot/<int:pilot_id>/promote/", pilot.pilot_promote_view, name="pilot_promote"),
    path("pilot/<int:pilot_id>/draft/", pilot.pilot_draft_view, name="pilot_draft"),
]
