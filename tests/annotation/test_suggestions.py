"""Suggestions learned from gold, stored and used (docs/suggestions.md): training a study's model
(service, Celery task run eagerly, command, page), what is stored with it, bad input and failures, who
may see it, and its uses — the adjudication queue's order and the likely-missed codes on the
adjudication page — never shown to an annotator."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.classifier import Params
from annotation.errors import AnnotationError
from annotation.models import Assignment, Discussion, FinalCoding, RunSuggestion, SuggestionModel
from annotation.services.review import discussion_escalate
from annotation.services.suggestions import study_queue_order_set, suggestions_train, suggestions_train_request
from tests.factories import (
    COLLISION,
    client_for,
    labelled_study,
    submit_disagreement,
)
from trajectories.models import Run, SignatureHit

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(tmp_path, codebook, trio, adjudicator):
    return labelled_study(tmp_path, codebook, trio, adjudicator)


def train_now(study, *, seed: int = 0, **params) -> SuggestionModel:
    model = suggestions_train_request(study=study, actor=None, seed=seed, params=Params(seed=seed, **params),
                                      queue=False)  # fmt: skip
    return suggestions_train(model_id=model.pk)


def test_the_fixture_has_signature_hits_for_the_model_to_learn_from(labelled):
    assert SignatureHit.objects.filter(run__studies=labelled, detector="same_file_collision").exists()


def test_a_trained_model_is_stored_with_its_provenance_scores_and_a_prediction_per_run(labelled):
    model = train_now(labelled, seed=5)
    assert model.status == "done" and model.error == ""
    assert (model.folds_done, model.folds_total) == (6, 6) and model.seconds is not None
    labelled_runs = set(FinalCoding.objects.filter(study=labelled).values_list("run_id", flat=True))
    assert set(model.training_run_ids) == labelled_runs
    assert model.label_counts[COLLISION] == 6
    assert model.modes == [COLLISION]
    assert {row["key"] for row in model.skipped} == set(model.label_counts) - {COLLISION}
    assert [row["key"] for row in model.scores] == [COLLISION]
    assert {"f1", "precision", "recall", "support"} <= set(model.scores[0])
    assert model.parameters["seed"] == 5 and model.features["metrics"]
    # the folds, as stored, never split a task
    task_of = dict(Run.objects.filter(pk__in=labelled_runs).values_list("pk", "task_id"))
    fold_of_task = {}
    for index, fold in enumerate(model.folds):
        for run_id in fold:
            assert fold_of_task.setdefault(task_of[run_id], index) == index
    predictions = RunSuggestion.objects.filter(model=model)
    assert predictions.count() == labelled.runs.count()
    assert set(predictions.filter(in_training=False).values_list("run_id", flat=True)) == set(
        labelled.runs.exclude(pk__in=labelled_runs).values_list("pk", flat=True)
    )
    for row in predictions:
        assert set(row.probabilities) == {COLLISION} and 0 <= row.uncertainty <= 1


def test_the_same_labels_and_seed_give_the_same_stored_model(labelled):
    first, second = train_now(labelled, seed=9), train_now(labelled, seed=9)
    assert (first.scores, first.folds, first.calibration) == (second.scores, second.folds, second.calibration)

    def probabilities(model):
        return dict(RunSuggestion.objects.filter(model=model).values_list("run_id", "probabilities"))

    assert probabilities(first) == probabilities(second)


def test_training_again_leaves_a_finished_model_as_it_is(labelled):
    model = train_now(labelled)
    again = suggestions_train(model_id=model.pk)
    assert again.status == "done" and RunSuggestion.objects.filter(model=model).count() == labelled.runs.count()


def test_a_study_without_enough_final_labels_is_refused_and_nothing_is_stored(study):
    with pytest.raises(AnnotationError, match="at least 5 tasks") as caught:
        suggestions_train_request(study=study, actor=None, seed=0)
    assert "labels" in caught.value.errors
    assert not SuggestionModel.objects.exists()


def test_a_second_training_is_refused_while_one_waits(labelled):
    suggestions_train_request(study=labelled, actor=None, seed=0, queue=False)
    with pytest.raises(AnnotationError, match="already being trained"):
        suggestions_train_request(study=labelled, actor=None, seed=1, queue=False)
    assert SuggestionModel.objects.count() == 1


def test_a_seed_out_of_range_is_refused_by_name(labelled):
    with pytest.raises(AnnotationError) as caught:
        suggestions_train_request(study=labelled, actor=None, seed=2**31)
    assert "seed" in caught.value.errors


def test_a_study_with_no_mode_frequent_enough_is_refused_by_name(labelled):
    with pytest.raises(AnnotationError, match="nothing to learn") as caught:
        suggestions_train_request(study=labelled, actor=None, seed=0, params=Params(min_positives=7))
    assert "labels" in caught.value.errors and not SuggestionModel.objects.exists()


def test_a_training_that_cannot_learn_stores_why(labelled):
    """The labels changed between the request and the worker (or the request was bypassed): the
    worker stores why it could not train."""
    model = SuggestionModel.objects.create(study=labelled, seed=0, parameters=Params(min_positives=100).as_dict())
    model = suggestions_train(model_id=model.pk)
    assert model.status == "failed" and "nothing to learn" in model.error
    assert not RunSuggestion.objects.filter(model=model).exists()


def test_a_failing_task_stores_its_error_and_raises(labelled):
    model = SuggestionModel.objects.create(study=labelled, seed=0, parameters={"seed": 0, "unknown": 1})
    with pytest.raises(TypeError):
        suggestions_train(model_id=model.pk)
    model.refresh_from_db()
    assert model.status == "failed" and model.error.startswith("TypeError") and model.finished_at


# -- the command ---------------------------------------------------------------------------------------


def test_the_command_trains_and_prints_the_scores(labelled, capsys):
    call_command("train_suggestions", "--study", "Labelled", "--seed", "3")
    out = capsys.readouterr().out
    assert COLLISION in out and "macro F1" in out
    assert SuggestionModel.objects.get().status == "done"


def test_the_command_names_a_missing_study_and_too_few_labels(study):
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("train_suggestions", "--study", "nope")
    with pytest.raises(CommandError, match="at least 5 tasks"):
        call_command("train_suggestions", "--study", study.name)


# -- the page ------------------------------------------------------------------------------------------


def test_the_adjudicator_trains_from_the_page_and_reads_the_scores(
    labelled, adjudicator, django_capture_on_commit_callbacks
):
    client = client_for(adjudicator)
    url = f"/annotate/studies/{labelled.pk}/suggestions/"
    assert "No bins" not in client.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # the worker's task, run eagerly in tests
        response = client.post(url + "train/", {"seed": "4", "folds": "4", "min_positives": "3"})
    assert response.status_code == 302
    model = SuggestionModel.objects.get()
    assert model.status == "done" and model.created_by == adjudicator and model.seed == 4
    assert (model.parameters["folds"], model.parameters["min_positives"], len(model.folds)) == (4, 3, 4)
    body = client.get(url).content.decode()
    assert "cross-validated scores per mode" in body and "Same-File Collision" in body
    row = next(r for r in model.scores if r["key"] == COLLISION)  # the positive class's counts, on the page
    cells = "".join(f"<td>{row[name]}</td>" for name in ("support", "predicted", "tp", "fp", "fn"))
    assert cells in body
    assert "<svg" in body and "Calibration" in body and "Provenance" in body


def test_bad_input_on_the_page_is_refused_with_its_field_named(labelled, study, adjudicator):
    client = client_for(adjudicator)
    bad_seed = client.post(f"/annotate/studies/{labelled.pk}/suggestions/train/", {"seed": "abc"})
    assert bad_seed.status_code == 422 and "seed: must be a whole number" in bad_seed.content.decode()
    too_few = client.post(f"/annotate/studies/{study.pk}/suggestions/train/", {"seed": "1"})
    assert too_few.status_code == 422 and "at least 5 tasks" in too_few.content.decode()
    bad_folds = client.post(f"/annotate/studies/{labelled.pk}/suggestions/train/", {"seed": "1", "folds": "-2"})
    assert bad_folds.status_code == 422 and "folds: must be a whole number" in bad_folds.content.decode()
    one_fold = client.post(f"/annotate/studies/{labelled.pk}/suggestions/train/", {"seed": "1", "folds": "1"})
    assert one_fold.status_code == 422 and "folds: 1 is out of range" in one_fold.content.decode()
    assert 'value="1"' in one_fold.content.decode()  # the form comes back as it was posted
    assert not SuggestionModel.objects.exists()


def test_the_progress_line_follows_a_training_and_reloads_the_page_when_it_ends(labelled, adjudicator):
    client = client_for(adjudicator)
    model = suggestions_train_request(study=labelled, actor=adjudicator, seed=0, queue=False)
    SuggestionModel.objects.filter(pk=model.pk).update(status="running", folds_done=2)
    url = f"/annotate/studies/{labelled.pk}/suggestions/status/?model={model.pk}"
    running = client.get(url, HTTP_HX_REQUEST="true")
    body = running.content.decode()
    assert running.status_code == 200 and "<html" not in body and "2 of 6 steps done" in body
    assert 'hx-trigger="every 2s"' in body
    SuggestionModel.objects.filter(pk=model.pk).update(status="failed", error="boom")
    finished = client.get(url, HTTP_HX_REQUEST="true")
    assert finished.status_code == 200 and finished["HX-Refresh"] == "true"
    assert "failed: boom" in client.get(f"/annotate/studies/{labelled.pk}/suggestions/").content.decode()
    assert client.get(f"/annotate/studies/{labelled.pk}/suggestions/status/?model=x").status_code == 400
    assert client.get(f"/annotate/studies/{labelled.pk}/suggestions/status/?model=999999").status_code == 400


def test_annotators_and_outsiders_cannot_reach_the_suggestions(labelled, trio, outsider):
    for user in (trio[0], outsider):
        client = client_for(user)
        assert client.get(f"/annotate/studies/{labelled.pk}/suggestions/").status_code == 403
        assert client.post(f"/annotate/studies/{labelled.pk}/suggestions/train/", {"seed": "1"}).status_code == 403
    assert not SuggestionModel.objects.exists()


# -- the uses ------------------------------------------------------------------------------------------


def stored_model(study, probabilities: dict[int, dict[str, float]], *, threshold: float = 0.5) -> SuggestionModel:
    """A finished model of the study with these predictions, as training would have stored them."""
    from annotation.classifier import uncertainty

    model = SuggestionModel.objects.create(
        study=study, seed=0, parameters=Params(threshold=threshold).as_dict(), status="done",
        modes=sorted({k for p in probabilities.values() for k in p}),
    )  # fmt: skip
    for run_id, p in probabilities.items():
        RunSuggestion.objects.create(model=model, run_id=run_id, probabilities=p, uncertainty=uncertainty(p),
                                     in_training=False)  # fmt: skip
    return model


@pytest.fixture
def escalated(study, codebook):
    """Two escalated discussions of the `study` fixture (lossy-handoff against stale-handoff)."""
    discussions = []
    for run in study.runs.order_by("pk")[:2]:
        discussion = submit_disagreement(study, run.pk, codebook)
        first = Assignment.objects.filter(study=study, run=run).order_by("slot").first()
        discussion_escalate(discussion=discussion, actor=first.annotator)
        discussions.append(Discussion.objects.get(pk=discussion.pk))
    return discussions


def test_the_adjudication_page_flags_likely_missed_codes(study, escalated, adjudicator):
    discussion = escalated[0]
    stored_model(study, {discussion.run_id: {COLLISION: 0.81, "lossy-handoff": 0.9, "stale-handoff": 0.2,
                                             "blind-timeout-wait": 0.3}})  # fmt: skip
    body = client_for(adjudicator).get(f"/annotate/adjudication/{discussion.pk}/").content.decode()
    assert "Likely-missed codes" in body
    card = body.split("Likely-missed codes", 1)[1].split("</section>", 1)[0]
    assert "Same-File Collision" in card and "p = 0.81" in card
    assert "Lossy Handoff" not in card  # a coding used it: not missed
    assert "Blind Timeout Wait" not in card  # below the threshold
    assert "likely missed · p 0.81" in body  # and on the ruling form, beside the mode


def test_without_a_model_the_adjudication_page_flags_nothing(study, escalated, adjudicator):
    body = client_for(adjudicator).get(f"/annotate/adjudication/{escalated[0].pk}/").content.decode()
    assert "Likely-missed codes" not in body and "likely missed" not in body


def test_the_adjudication_queue_orders_by_uncertainty_on_request(study, escalated, adjudicator):
    sure, unsure = escalated
    stored_model(study, {sure.run_id: {COLLISION: 0.99}, unsure.run_id: {COLLISION: 0.55}})
    client = client_for(adjudicator)

    def order(query: str) -> list[Discussion]:
        body = client.get("/annotate/adjudication/" + query).content.decode()
        return sorted(escalated, key=lambda d: body.index(f"/annotate/adjudication/{d.pk}/"))

    assert order("?order=uncertainty") == [unsure, sure]
    assert "0.90" in client.get("/annotate/adjudication/?order=uncertainty").content.decode()  # 1 − |2·0.55 − 1|
    assert client.get("/annotate/adjudication/?order=bogus").status_code == 400


def test_the_uncertainty_order_pages_with_a_cursor(study, escalated, adjudicator):
    from annotation.selectors.review import adjudication_page

    sure, unsure = escalated
    stored_model(study, {sure.run_id: {COLLISION: 0.99}})  # the other run has no prediction: last
    from annotation.selectors import review

    size = review.LIST_PAGE_SIZE
    review.LIST_PAGE_SIZE = 1
    try:
        first = adjudication_page(user=adjudicator, filters={}, params={}, order="uncertainty")
        second = adjudication_page(user=adjudicator, filters={}, params={"after": str(first.after)},
                                   order="uncertainty")  # fmt: skip
    finally:
        review.LIST_PAGE_SIZE = size
    assert [d.pk for d in first.items] == [sure.pk] and [d.pk for d in second.items] == [unsure.pk]


def test_no_annotator_page_or_api_shows_a_model_output(study, escalated, trio, codebook):
    """The model's probabilities, its name and its flags appear on no page an annotator can open,
    whatever the model says about their runs."""
    run_ids = list(study.runs.values_list("pk", flat=True))
    stored_model(study, {run_id: {COLLISION: 0.97, "stale-handoff": 0.5} for run_id in run_ids})
    study_queue_order_set(study=study, by_uncertainty=True, actor=None)  # their queues follow the model
    for coder in trio:
        client = client_for(coder)
        urls = ["/annotate/", "/annotate/discussions/", "/api/assignments/"]
        for assignment in Assignment.objects.filter(study=study, annotator=coder):
            urls += [f"/annotate/{assignment.pk}/", f"/api/annotations/{assignment.pk}/",
                     f"/trajectories/runs/{assignment.run_id}/"]  # fmt: skip
        for discussion in Discussion.objects.filter(study=study, run__assignments__annotator=coder):
            urls.append(f"/annotate/discussions/{discussion.pk}/")
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            body = response.content.decode().lower()
            for leak in ("likely missed", "likely-missed", "suggestion", "0.97", "uncertainty", "probabilit"):
                assert leak not in body, f"{url} shows {leak!r} to {coder}"


# -- annotators' queues ordered by uncertainty (a study setting, off by default) ------------------------


def queue_runs(study, coder) -> list[int]:
    return list(
        Assignment.objects.filter(study=study, annotator=coder).order_by("position").values_list("run_id", flat=True)
    )


def test_annotators_untouched_runs_follow_the_models_uncertainty_when_the_study_asks(
    study, trio, adjudicator, codebook
):
    from annotation.assignment import queue_order
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import annotation_save

    coder = trio[0]
    assert not study.queue_by_uncertainty  # off by default
    before = queue_runs(study, coder)
    started = Assignment.objects.filter(study=study, annotator=coder).order_by("position")[1]
    annotation_save(annotation=annotation_for(assignment=started), actor=coder, version=1, no_failure=True, notes="",
                    labels=[])  # fmt: skip
    run_ids = list(study.runs.order_by("pk").values_list("pk", flat=True))
    # uncertainty rises with the run id: 1 − |2p − 1| for p from 0.95 down towards 0.5
    stored_model(study, {run_id: {COLLISION: 0.95 - 0.08 * i} for i, run_id in enumerate(run_ids)})
    client = client_for(adjudicator)
    response = client.post(f"/annotate/studies/{study.pk}/suggestions/queue-order/", {"order": "uncertainty"})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.queue_by_uncertainty
    from activity.models import ActivityEntry

    logged = ActivityEntry.objects.get(action="study.queue_order", study_id=study.pk)
    assert logged.actor_id == adjudicator.pk and "by uncertainty" in logged.summary
    after = queue_runs(study, coder)
    assert after.index(started.run_id) == before.index(started.run_id)  # started work keeps its place
    untouched = [run_id for run_id in after if run_id != started.run_id]
    assert untouched == sorted(untouched, reverse=True)  # most uncertain (highest id here) first
    # the queue page an annotator sees is in that order, and says nothing of why
    body = client_for(coder).get(f"/annotate/?study={study.pk}").content.decode()
    links = [f"/annotate/{a.pk}/" for a in Assignment.objects.filter(study=study, annotator=coder).order_by("position")]
    assert [body.rindex(link) for link in links] == sorted(body.rindex(link) for link in links)  # the table rows
    # and back: untouched runs in the order the seed draws
    assert client.post(f"/annotate/studies/{study.pk}/suggestions/queue-order/", {"order": "seed"}).status_code == 302
    back = queue_runs(study, coder)
    assert back.index(started.run_id) == before.index(started.run_id)
    rest = [run_id for run_id in back if run_id != started.run_id]
    first = min(a.position for a in Assignment.objects.filter(study=study, annotator=coder, run_id__in=rest))
    assert rest == queue_order(rest, seed=study.seed, annotator=coder.username, start=first)


def test_a_new_model_reorders_the_queues_of_a_study_that_asks(labelled):
    from annotation.services.studies import study_assign

    study_assign(study=labelled)
    labelled.queue_by_uncertainty = True
    labelled.save(update_fields=["queue_by_uncertainty"])
    model = train_now(labelled)
    uncertainty = dict(RunSuggestion.objects.filter(model=model).values_list("run_id", "uncertainty"))
    for coder in labelled.annotators.all():
        values = [uncertainty[run_id] for run_id in queue_runs(labelled, coder)]
        assert values == sorted(values, reverse=True)


def test_the_queue_order_setting_refuses_bad_input_and_other_people(study, trio, adjudicator):
    url = f"/annotate/studies/{study.pk}/suggestions/queue-order/"
    refused = client_for(adjudicator).post(url, {"order": "random"})
    assert refused.status_code == 422 and "order: must be" in refused.content.decode()
    assert client_for(trio[0]).post(url, {"order": "uncertainty"}).status_code == 403
    study.refresh_from_db()
    assert not study.queue_by_uncertainty
