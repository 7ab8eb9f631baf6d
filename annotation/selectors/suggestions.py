"""Reads for the suggestions learned from gold (docs/suggestions.md): what the classifier is trained
on (a study's runs as features, its final labels at mode level), a study's models, and what the
adjudicator sees of the current one. Nothing here is ever read for an annotator's page: their
queue's order is the only thing a model may change for them."""

from __future__ import annotations

from django.db.models import Count, Max, OuterRef, Subquery
from django.db.models.functions import Substr

from taxonomy.models import Code
from trajectories.models import Event, SignatureHit
from trajectories.signatures import DETECTORS

from ..classifier import METRICS, TEXT_CHARS_PER_EVENT, TEXT_EVENT_KINDS, Params, RunInput, run_text
from ..models import FinalCoding, FinalLabel, RunSuggestion, Study, SuggestionModel

MODELS_LISTED = 10


def mode_keys(*, study: Study) -> list[str]:
    """The study codebook's modes, in codebook order."""
    return list(
        Code.objects.filter(codebook_id=study.codebook_id, level=Code.Level.MODE)
        .order_by("position")
        .values_list("key", flat=True)
    )


def gold_modes(*, study: Study) -> dict[int, set[str]]:
    """Each run with a final coding → the mode keys of its final labels (empty: no failure). Two queries."""
    gold: dict[int, set[str]] = {run_id: set() for run_id in FinalCoding.objects.filter(study=study).values_list(
        "run_id", flat=True)}  # fmt: skip
    rows = FinalLabel.objects.filter(final__study=study, code__level=Code.Level.MODE).values_list(
        "final__run_id", "code__key"
    )
    for run_id, key in rows:
        gold[run_id].add(key)
    return gold


def training_inputs(*, study: Study) -> list[RunInput]:
    """Every run of the study as the model sees it: metrics, signature hits and bounded text, in run
    id order. Three queries; the events are streamed, each cut to TEXT_CHARS_PER_EVENT in SQL."""
    runs = study.runs.order_by("pk").values("pk", "task_id", *METRICS)
    hits: dict[int, list[tuple[str, list[str]]]] = {}
    for run_id, detector, modes in SignatureHit.objects.filter(run__studies=study).values_list(
        "run_id", "detector", "modes"
    ):
        hits.setdefault(run_id, []).append((detector, modes))
    pieces: dict[int, list[tuple[str, str, str]]] = {}
    events = (
        Event.objects.filter(run__studies=study, kind__in=TEXT_EVENT_KINDS)
        .order_by("run_id", "context_id", "seq")
        .values_list("run_id", "kind", "tool", Substr("text", 1, TEXT_CHARS_PER_EVENT))
    )
    for run_id, kind, tool, text in events.iterator(chunk_size=5000):
        pieces.setdefault(run_id, []).append((kind, tool, text))
    return [
        RunInput(
            run_id=row["pk"],
            group=f"task-{row['task_id']}",
            metrics={name: row[name] for name in METRICS},
            hits=hits.get(row["pk"], ()),
            text=run_text(pieces.get(row["pk"], ())),
        )
        for row in runs
    ]


def detector_names() -> list[str]:
    return list(DETECTORS)


def study_models(*, study: Study) -> list[SuggestionModel]:
    """The study's most recent models, newest first (their big JSON documents left out). One query."""
    return list(
        SuggestionModel.objects.filter(study=study)
        .defer("features", "training_run_ids", "folds")
        .select_related("created_by")[:MODELS_LISTED]
    )


def labelled_reach(*, study: Study) -> tuple[int, int]:
    """What the study's final labels give a training: the tasks whose runs have final labels (the folds are cut
    by task), and the runs of the most frequent mode among them. Two queries."""
    tasks = FinalCoding.objects.filter(study=study).values("run__task_id").distinct().count()
    most = (
        FinalLabel.objects.filter(final__study=study, code__level=Code.Level.MODE)
        .values("code_id")
        .annotate(runs=Count("final_id", distinct=True))
        .aggregate(most=Max("runs"))["most"]
        or 0
    )
    return tasks, most


def training_defaults(*, study: Study, latest: SuggestionModel | None) -> dict:
    """What the training form starts from: the parameters of the study's latest model, or — before any — the
    defaults (annotation/classifier.py Params) brought down to what the study's final labels allow (folds: the tasks
    with final labels; least runs per mode: the most frequent mode's), never below 2; with a sentence saying so."""
    defaults = Params()
    if latest is not None:
        used = latest.parameters or {}
        return {
            "seed": latest.seed,
            "folds": used.get("folds", defaults.folds),
            "min_positives": used.get("min_positives", defaults.min_positives),
            "note": f"The parameters of model #{latest.pk}.",
        }
    tasks, most = labelled_reach(study=study)
    folds, least = max(2, min(defaults.folds, tasks)), max(2, min(defaults.min_positives, most))
    note = ""
    if (folds, least) != (defaults.folds, defaults.min_positives):
        note = (
            f"Brought down from {defaults.folds} folds and {defaults.min_positives} runs per mode to what this "
            f"study's final labels allow: runs of {tasks} task(s), the most frequent mode in {most} run(s)."
        )
    return {"seed": study.seed, "folds": folds, "min_positives": least, "note": note}


def current_model(*, study: Study, full: bool = False) -> SuggestionModel | None:
    """The study's newest finished model: the one the adjudication pages use (without its stored
    documents unless `full`). One query."""
    qs = SuggestionModel.objects.filter(study=study, status=SuggestionModel.Status.DONE).select_related("created_by")
    if not full:
        qs = qs.defer("features", "training_run_ids", "folds", "scores", "calibration", "label_counts", "skipped")
    return qs.order_by("-created_at", "-pk").first()


def _newest(study_ref) -> Subquery:
    """The id of the newest finished model of a study (a study, or an OuterRef to one)."""
    return Subquery(
        SuggestionModel.objects.filter(study=study_ref, status=SuggestionModel.Status.DONE)
        .order_by("-created_at", "-pk")
        .values("pk")[:1]
    )


def uncertainty_subquery() -> Subquery:
    """For a Discussion queryset: the run's uncertainty under its study's current model (None
    without one)."""
    return Subquery(
        RunSuggestion.objects.filter(run=OuterRef("run"), model=_newest(OuterRef(OuterRef("study")))).values(
            "uncertainty"
        )[:1]
    )


def likely_missed(*, study: Study, run_id: int, used: set[str]) -> dict:
    """The modes the study's current model rates at or above its threshold for this run that no
    coding used: {"model": the model or None, "modes": [{"key", "name", "p"}]}, highest first. One
    query, two when some mode is flagged."""
    row = (
        RunSuggestion.objects.filter(run_id=run_id, model=_newest(study))
        .select_related("model")
        .only("probabilities", "model__parameters", "model__study_id")
        .first()
    )
    if row is None:
        return {"model": None, "modes": []}
    model = row.model
    keys = [key for key, p in row.probabilities.items() if p >= model.threshold and key not in used]
    if not keys:
        return {"model": model, "modes": []}
    names = dict(Code.objects.filter(codebook_id=study.codebook_id, key__in=keys).values_list("key", "name"))
    modes = [{"key": key, "name": names.get(key, key), "p": row.probabilities[key]} for key in keys]
    modes.sort(key=lambda m: (-m["p"], m["key"]))
    return {"model": model, "modes": modes}
