from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import floatformat

from annotation.analysis.signatures import COLUMNS, evaluation_rows
from annotation.analysis.store import analysis_section
from annotation.management.studies import study_from_ref
from annotation.models import FinalCoding, PublishedRecord
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
        "Failure signatures measured against a study's gold — its final labels, and where the study's published "
        "review.json decides a mode, that decision (docs/signatures.md): TP, FP, FN, TN, precision and recall per "
        "detector, per mode and per detector × mode."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study id or name.")
        parser.add_argument("--csv", type=Path, metavar="PATH", help="Also write every row as CSV to PATH.")

    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        reviewed = PublishedRecord.objects.filter(study=study, kind=PublishedRecord.Kind.REVIEW)
        if not FinalCoding.objects.filter(study=study).exists() and not reviewed.exists():
            raise CommandError(
                f"study {study.name!r} has no final labels yet and no published review: there is no gold to "
                "measure against"
            )
        evaluation = analysis_section(study, "signatures")  # the dashboard's figures, or computed now
        runs = evaluation["runs"]
        if not runs["evaluated"]:
            raise CommandError(
                f"none of the {runs['with_final']} runs of {study.name!r} with gold has signatures computed "
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
        reviewed = evaluation.get("reviewed_runs", 0)
        gold = "final labels or the study's published review" if reviewed else "final labels"
        write(
            f"{name}: {runs['evaluated']} runs with {gold} and signatures (detectors version "
            f"{evaluation['detector_version']})"
            + (
                f"; {runs['unchecked']} runs with {gold} left out: signatures not computed by these detectors"
                if runs["unchecked"]
                else ""
            )
        )
        if reviewed:
            write(
                f"{reviewed} of them with the study's published review: its retain/reject decision is the gold for "
                "each mode it decides (rejected: an explicit negative; 'rej' counts them, 'FP rej' the hits on them)"
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
            extra = f"  {'rej':>4} {'FP rej':>6}" if reviewed else ""
            write(f"{'':<{width}}  {'runs':>5} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4}  precision  recall{extra}")
            for label, r in zip(labels, rows, strict=True):
                note = "" if r["in_codebook"] else "  (not in the study's codebook)"
                explicit = f"  {r.get('rejected', 0):>4} {r.get('fp_rejected', 0):>6}" if reviewed else ""
                write(
                    f"{label:<{width}}  {r['runs']:>5} {r['tp']:>4} {r['fp']:>4} {r['fn']:>4} {r['tn']:>4}  "
                    f"{_figure(r['precision']):>9}  {_figure(r['recall']):>6}{explicit}{note}"
                )
        write("")
        write("n/a: undefined (precision: the detector never fired; recall: gold never has the mode).")
