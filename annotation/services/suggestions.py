"""Training the suggestions classifier of a study (docs/suggestions.md): a request stores a pending
model and queues the worker once it commits; the worker's `suggestions_train` gathers the study's
runs and final labels, cross-validates and fits (classifier.py), reporting folds done as it
goes, and stores the result whole — scores, calibration, provenance and one RunSuggestion per run —
or, when training fails, the error and nothing else."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from activity.services import record

from ..analysis.inputs import hint_free_runs
from ..assignment import queue_order
from ..classifier import Params, SuggestionError, train, uncertainty
from ..errors import AnnotationError
from ..models import Assignment, RunSuggestion, Study, SuggestionModel
from ..selectors import suggestions as selectors

logger = logging.getLogger(__name__)
SEED_RANGE = (0, 2**31 - 1)
# A training waiting longer than this was evidently lost (its message, or its worker): another may start.
STALE_PENDING = timedelta(minutes=10)
STALE_RUNNING = timedelta(hours=1)


def suggestions_train_request(
    *, study: Study, actor: AbstractBaseUser | None, seed: int, params: Params | None = None, queue: bool = True
) -> SuggestionModel:
    """Store a pending model for the study and queue its training (`queue=False`: the caller trains
    it in the foreground with `suggestions_train`, as the command does). Refused (AnnotationError naming
    the field) when a training of the study is already waiting or running, when the seed or a
    parameter is out of range, when the study has too few final labels to split by task, or when no
    mode has enough runs with it to learn from."""
    params = params or Params(seed=seed)
    if params.seed != seed:
        params = Params(**{**params.as_dict(), "seed": seed})
    if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise AnnotationError(
            f"seed: must be a whole number from 0 to {SEED_RANGE[1]}", errors={"seed": "out of range"}
        )
    try:
        params.validate()
    except SuggestionError as exc:
        raise AnnotationError(str(exc), errors={exc.field: str(exc)}) from exc
    tasks, positives = selectors.labelled_reach(study=study)
    if tasks < params.folds:
        raise AnnotationError(
            f"{study.name} has final labels for runs of {tasks} task(s): training needs runs of at least "
            f"{params.folds} tasks (grouped cross-validation in {params.folds} folds)",
            errors={"labels": "too few final labels"},
        )
    if positives < params.min_positives:
        raise AnnotationError(
            f"{study.name}: no mode is in the final labels of {params.min_positives} or more runs yet (at most "
            f"{positives}): nothing to learn",
            errors={"labels": "too few final labels per mode"},
        )
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()  # one request at a time per study
        now = timezone.now()
        busy = SuggestionModel.objects.filter(study=study).filter(
            Q(status=SuggestionModel.Status.PENDING, created_at__gte=now - STALE_PENDING)
            | Q(status=SuggestionModel.Status.RUNNING, started_at__gte=now - STALE_RUNNING)
        )
        if busy.exists():
            raise AnnotationError(
                "a model of this study is already being trained: wait for it to finish",
                errors={"status": "busy"},
            )
        model = SuggestionModel.objects.create(
            study=study, seed=seed, parameters=params.as_dict(), created_by=actor, folds_total=params.folds + 1
        )
        if queue:
            transaction.on_commit(lambda: _enqueue(model.pk))
    return model


def _enqueue(model_id: int) -> None:
    from ..tasks import train_suggestions

    train_suggestions.delay(model_id)


def suggestions_train(*, model_id: int) -> SuggestionModel | None:
    """Train a pending model (the worker calls this). Safe to run twice: a model that is already
    running, done or failed is left as it is."""
    claimed = SuggestionModel.objects.filter(pk=model_id, status=SuggestionModel.Status.PENDING).update(
        status=SuggestionModel.Status.RUNNING, started_at=timezone.now()
    )
    model = SuggestionModel.objects.select_related("study").filter(pk=model_id).first()
    if model is None or not claimed:
        return model
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        SuggestionModel.objects.filter(pk=model_id).update(folds_done=done, folds_total=total)

    try:
        study = model.study
        params = Params(**model.parameters)
        result = train(
            selectors.training_inputs(study=study),
            selectors.gold_modes(study=study),
            modes=selectors.mode_keys(study=study),
            detectors=selectors.detector_names(),
            params=params,
            progress=progress,
            hint_free=hint_free_runs(study=study),
        )
    except SuggestionError as exc:  # the study's data cannot train a model: say why, on the model
        _fail(model_id, str(exc))
        return SuggestionModel.objects.get(pk=model_id)
    except Exception as exc:  # anything else is a bug: stored on the model for the page, and raised
        _fail(model_id, f"{type(exc).__name__}: {exc}")
        raise
    training = set(result.training_run_ids)
    with transaction.atomic():
        RunSuggestion.objects.bulk_create(
            [
                RunSuggestion(
                    model_id=model_id,
                    run_id=run_id,
                    probabilities=probabilities,
                    uncertainty=round(uncertainty(probabilities), 6),
                    in_training=run_id in training,
                )  # fmt: skip
                for run_id, probabilities in result.predictions.items()
            ],
            batch_size=1000,
        )
        for name in ("features", "training_run_ids", "label_counts", "modes", "skipped", "folds", "scores",
                     "summary", "calibration"):  # fmt: skip
            setattr(model, name, getattr(result, name))
        model.status = SuggestionModel.Status.DONE
        model.finished_at = timezone.now()
        model.seconds = time.perf_counter() - start
        model.folds_done = model.folds_total = len(result.folds) + 1
        model.save()
        if Study.objects.filter(pk=model.study_id, queue_by_uncertainty=True).exists():
            queues_reorder(study=Study.objects.get(pk=model.study_id))
    return model


def _fail(model_id: int, error: str) -> None:
    logger.warning("suggestions model %s failed: %s", model_id, error)
    SuggestionModel.objects.filter(pk=model_id).update(
        status=SuggestionModel.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


@transaction.atomic
def study_queue_order_set(*, study: Study, by_uncertainty: bool, actor: AbstractBaseUser | None) -> int:
    """Order the annotators' untouched runs by the current model's uncertainty (or, turned off, back
    into an order drawn from the study's seed); returns how many assignments moved."""
    Study.objects.select_for_update().filter(pk=study.pk).update(queue_by_uncertainty=by_uncertainty)
    study.queue_by_uncertainty = by_uncertainty
    moved = queues_reorder(study=study)
    record("study.queue_order", f"annotators' queues ordered {'by uncertainty' if by_uncertainty else 'by the seed'}"
           f": {moved} untouched assignments moved", actor=actor, study_id=study.pk, by_uncertainty=by_uncertainty,
           moved=moved)  # fmt: skip
    return moved


def queues_reorder(*, study: Study) -> int:
    """Permute the queue positions of each annotator's *untouched* assignments (no coding started:
    no annotation row) among themselves: most uncertain to the study's current model first when
    the study orders by uncertainty (a run without a prediction after those with one), else in the
    order the seed draws (assignment.queue_order). Started, skipped and submitted work keeps
    its place. Annotators see the order only. Returns how many assignments moved."""
    model = selectors.current_model(study=study) if study.queue_by_uncertainty else None
    uncertainty_of = (
        dict(RunSuggestion.objects.filter(model=model).values_list("run_id", "uncertainty")) if model else {}
    )
    untouched = (
        Assignment.objects.filter(study=study, annotation__isnull=True)
        .select_related("annotator")
        .order_by("annotator_id", "position")
    )
    by_annotator: dict[int, list[Assignment]] = {}
    for assignment in untouched:
        by_annotator.setdefault(assignment.annotator_id, []).append(assignment)
    changed: list[tuple[Assignment, int]] = []
    for assignments in by_annotator.values():
        positions = [a.position for a in assignments]
        seeded = queue_order([a.run_id for a in assignments], seed=study.seed,
                             annotator=assignments[0].annotator.get_username(), start=positions[0])  # fmt: skip
        rank = {run_id: i for i, run_id in enumerate(seeded)}
        order = sorted(assignments, key=lambda a: (-uncertainty_of.get(a.run_id, -1.0), rank[a.run_id]))
        changed += [(a, p) for a, p in zip(order, positions, strict=True) if a.position != p]
    if not changed:
        return 0
    # (study, annotator, position) is unique: move the rows out of the way first, then into place
    free = (Assignment.objects.filter(study=study).aggregate(top=Max("position"))["top"] or 0) + 1
    for offset, (assignment, _) in enumerate(changed):
        assignment.position = free + offset
    Assignment.objects.bulk_update([a for a, _ in changed], ["position"], batch_size=1000)
    for assignment, position in changed:
        assignment.position = position
    Assignment.objects.bulk_update([a for a, _ in changed], ["position"], batch_size=1000)
    return len(changed)
