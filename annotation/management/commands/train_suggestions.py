from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.classifier import Params
from annotation.errors import AnnotationError
from annotation.management.studies import study_from_ref
from annotation.services.suggestions import suggestions_train, suggestions_train_request


class Command(BaseCommand):
    help = (
        "Train a study's suggestions classifier on its final labels in the foreground (what the worker does "
        "from the Suggestions page) and print its cross-validated scores per mode (docs/suggestions.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study id or name.")
        parser.add_argument("--seed", type=int, default=None, help="Default: the study's seed.")
        defaults = Params()
        parser.add_argument("--folds", type=int, default=defaults.folds, help="Grouped CV folds (by task).")
        parser.add_argument(
            "--min-positives", type=int, default=defaults.min_positives, help="Fewer runs with a mode: not trained."
        )
        parser.add_argument("--threshold", type=float, default=defaults.threshold, help="p ≥ this: suggested.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        seed = study.seed if options["seed"] is None else options["seed"]
        params = Params(seed=seed, folds=options["folds"], min_positives=options["min_positives"],
                        threshold=options["threshold"])  # fmt: skip
        try:
            model = suggestions_train_request(study=study, actor=None, seed=seed, params=params, queue=False)
        except AnnotationError as exc:
            raise CommandError(str(exc)) from exc
        model = suggestions_train(model_id=model.pk)
        if model.status != model.Status.DONE:
            raise CommandError(f"model #{model.pk} failed: {model.error}")
        out = self.stdout
        summary = model.summary
        out.write(f"model #{model.pk} of {study}: {summary['runs']} runs from {summary['tasks']} tasks, "
                  f"{len(model.folds)} folds by task, seed {seed}, {model.seconds:.1f} s")  # fmt: skip
        out.write(f"{'mode':40} {'support':>7} {'precision':>9} {'recall':>7} {'F1':>6}")
        for row in model.scores:
            out.write(f"{row['key']:40} {row['support']:>7} {row['precision']:>9.3f} {row['recall']:>7.3f} "
                      f"{row['f1']:>6.3f}")  # fmt: skip
        for row in model.skipped:
            if row["positives"]:
                out.write(f"{row['key']:40} {row['positives']:>7}  not trained: {row['reason']}")
        out.write(self.style.SUCCESS(f"micro F1 {summary['micro_f1']:.3f}, macro F1 {summary['macro_f1']:.3f}"))
