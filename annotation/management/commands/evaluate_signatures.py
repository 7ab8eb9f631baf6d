from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import floatformat

from annotation.analysis.signatures import COLUMNS, evaluation_rows
from annotation.analysis.store import analysis_section
from annotation.management.studies import study_from_ref
from annotation.models import FinalCoding
from trajectories.exports import csv_lines

HEADINGS = {
    "detectors": "Per detector (gold: any of the detector's modes)",
    "modes": "Per mode (predicted: a hit of any detector lists it)",
    "detector_modes": "Per detector × mode (predicted: a hit of the detector lists the mode)",
}


def _figure(value: float | None) -> str:
    # the dashboard's own rounding (half up), so that both show the same figure
    return "n/a" if value is None else str(floatformat(value, 3))


class Command(BaseCommand):
    help = (
        "Failure signatures measured against a study's final labels (docs/signatures.md): TP, FP, FN, TN, "
        "precision and recall per detector, per mode and per detector × mode."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study id or name.")
        parser.add_argument("--csv", type=Path, metavar="PATH", help="Also write every row as CSV to PATH.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        if not FinalCoding.objects.filter(study=study).exists():
            raise CommandError(f"study {study.name!r} has no final labels yet: there is no gold to measure against")
        evaluation = analysis_section(study, "signatures")  # the dashboard's figures, or computed now
        runs = evaluation["runs"]
        if not runs["evaluated"]:
            raise CommandError(
                f"none of the {runs['with_final']} runs of {study.name!r} with final labels has signatures computed "
                f"by the current detectors (version {evaluation['detector_version']}): run "
                "`manage.py detect_signatures --all` first"
            )
        if options["csv"] is not None:
            path: Path = options["csv"]
            try:
                with path.open("w", encoding="utf-8", newline="") as out:
                    out.writelines(csv_lines(evaluation_rows(evaluation), COLUMNS))
            except OSError as exc:
                raise CommandError(f"--csv {path}: cannot write ({exc.strerror or exc})") from exc
        self._table(study.name, evaluation)
        if options["csv"] is not None:
            self.stdout.write(self.style.SUCCESS(f"wrote {options['csv']}"))

    def _table(self, name: str, evaluation: dict) -> None:
        runs = evaluation["runs"]
        write = self.stdout.write
        write(
            f"{name}: {runs['evaluated']} runs with final labels and signatures (detectors version "
            f"{evaluation['detector_version']})"
            + (
                f"; {runs['unchecked']} runs with final labels left out: signatures not computed by these detectors"
                if runs["unchecked"]
                else ""
            )
        )
        write(
            f"gold (run, mode) pairs: {evaluation['gold_pairs']}, of modes some detector supports: "
            f"{evaluation['gold_pairs_covered']}"
        )
        for key in ("detectors", "modes", "detector_modes"):
            rows = evaluation[key]
            labels = [" × ".join(filter(None, (r["detector"], r["mode"]))) for r in rows]
            width = max(len(label) for label in labels)
            write("")
            write(HEADINGS[key])
            write(f"{'':<{width}}  {'runs':>5} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4}  precision  recall")
            for label, r in zip(labels, rows, strict=True):
                note = "" if r["in_codebook"] else "  (not in the study's codebook)"
                write(
                    f"{label:<{width}}  {r['runs']:>5} {r['tp']:>4} {r['fp']:>4} {r['fn']:>4} {r['tn']:>4}  "
                    f"{_figure(r['precision']):>9}  {_figure(r['recall']):>6}{note}"
                )
        write("")
        write("n/a: undefined (precision: the detector never fired; recall: gold never has the mode).")
