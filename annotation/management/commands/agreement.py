from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.analysis import compute
from annotation.analysis.agreement import (
    AgreementInputError,
    agreement_report,
    codings_from_json,
    headline_bootstrap,
    taxonomy_from_json,
)
from annotation.analysis.compute import BOOTSTRAP_RESAMPLES
from annotation.analysis.inputs import read_inputs
from annotation.models import Study


class Command(BaseCommand):
    help = (
        "Inter-annotator agreement (docs/agreement.md): Cohen's κ per level, pair and code, Krippendorff's α "
        "(MASI), Fleiss' κ. From a JSON file (--input) or a study in the database (--study, default: newest)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--input", type=Path, help='{"taxonomy": {"modes": {...}}, "annotations": [...]}')
        parser.add_argument("--study", help="Study id or name (without --input).")
        parser.add_argument("--format", choices=("json",), default="json")
        parser.add_argument("--ci", action="store_true", help="Add a bootstrap 95%% CI for the headline κ.")
        parser.add_argument("--resamples", type=int, default=BOOTSTRAP_RESAMPLES)
        parser.add_argument(
            "--raters",
            type=int,
            default=None,
            help="Codings per run by design, for Fleiss' κ (--input; default: the file's 'raters', else the most "
            "codings any run has). A study uses its own coders per run.",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="Bootstrap seed for --input (default 0); a study uses its own."
        )

    def handle(self, *args, **options) -> None:
        if options["input"]:
            path: Path = options["input"]
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise CommandError(f"{path}: cannot read ({exc})") from exc
            except json.JSONDecodeError as exc:
                raise CommandError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from exc
            try:
                taxonomy, codings = taxonomy_from_json(data), codings_from_json(data)
            except AgreementInputError as exc:
                raise CommandError(f"{path}: {exc}") from exc
        else:
            ref = options["study"]
            studies = Study.objects.all()
            study = (
                studies.filter(pk=int(ref))
                if ref and ref.isdigit()
                else studies.filter(name=ref)
                if ref
                else studies.order_by("-created_at")
            ).first()
            if study is None:
                raise CommandError(f"no study {ref!r}" if ref else "no study in the database; use --input FILE")
            if options["seed"] is not None and options["seed"] != study.seed:
                raise CommandError(f"{study} bootstraps with its own seed ({study.seed}), as its dashboard does")
            # The dashboard's own computation (annotation/analysis/), so that both print the same numbers.
            inputs = read_inputs(study, parts=("agreement",))
            report = compute.agreement(inputs, resamples=options["resamples"] if options["ci"] else 0)
            self.stdout.write(json.dumps(compute.jsonable(report), indent=2))
            return
        try:
            raters = options["raters"] if options["raters"] is not None else data.get("raters")
            if raters is not None and (not isinstance(raters, int) or isinstance(raters, bool) or raters < 2):
                raise CommandError(f"{path}: field 'raters': the codings per run by design, a whole number ≥ 2")
            report = agreement_report(taxonomy, codings, raters=raters)
            if options["ci"]:
                report["headline"] = headline_bootstrap(
                    taxonomy, codings, n_resamples=options["resamples"], seed=options["seed"] or 0
                )
        except AgreementInputError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(report, indent=2, sort_keys=False))
