"""The failure-signature detectors measured against gold (docs/signatures.md): on real task folders of
the study's artifact against the study's own published decisions, or on the planted corpus.

In a scratch SQLite database (or BENCH_DATABASE_URL, which is flushed), with `--real FOLDER...`: imports
the folders (the artifact's `<benchmark>/<task>/<agent>/{parallel,serial}` layout), puts their concurrent
runs in a study of the demo users, loads each pair's published `annotation.md` and `review.json` as the
study's gold (`import_published --as-gold`: review.json's retain/reject per candidate mode is the gold
for that mode) and prints `evaluate_signatures` for that study. Without `--real`: writes the planted
corpus with its sequential twins (`generate_corpus --plant --twins`), imports it, puts every planted run
in a study, has both annotators of each run submit the modes its plant was built to show
(trajectories.generate.PLANTED_MODES; a clean run: no failure) through the coding services, so that
each run's final coding is agreed, and prints `evaluate_signatures` for that study.

    .venv/bin/python bench/signature_eval.py --real ../shared/data/real-trajectories/artifact-task-folder
    .venv/bin/python bench/signature_eval.py [--copies 5] [--seed 0] [--csv PATH]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.django_env import setup_django  # noqa: E402

scratch = setup_django("parallax-signature-eval-")

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from annotation.models import Assignment  # noqa: E402
from annotation.selectors.queue import annotation_for  # noqa: E402
from annotation.services.coding import LabelInput, annotation_save, annotation_submit  # noqa: E402
from annotation.services.studies import study_assign, study_create  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402
from trajectories.generate import MANIFEST_NAME, PLANTED_MODES, generate_planted  # noqa: E402
from trajectories.models import Run  # noqa: E402
from trajectories.services import import_paths  # noqa: E402

STUDY = "Planted signatures"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5, help="runs per plant (and clean runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="also write the rows as CSV")
    parser.add_argument("--real", nargs="+", type=Path, metavar="FOLDER", help="real task folders with published gold")
    args = parser.parse_args()
    if connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    call_command("create_demo_users", "--i-know-this-is-a-demo", stdout=io.StringIO())  # a scratch database
    codebook = codebook_load_default()
    if args.real:
        real(args.real, codebook, args.csv)
        return
    corpus = Path(scratch) / "planted"
    generate_planted(corpus, seed=args.seed, copies=args.copies, twins=True)
    manifest = json.loads((corpus / MANIFEST_NAME).read_text())
    import_paths(paths=[corpus])
    runs = {r.source_name.rsplit("/", 1)[-1]: r for r in Run.objects.filter(mode="concurrent")}
    annotators = list(User.objects.filter(username__in=["annotator1", "annotator2", "annotator3"]))
    with transaction.atomic():  # the study's statistics are computed once, when this commits
        study = study_create(name=STUDY, codebook=codebook, annotators=annotators,
                             adjudicator=User.objects.get(username="senior"))  # fmt: skip
        study_assign(study=study)
        codes = {c.key: c for c in codebook.codes.filter(level="mode")}
        for name, plants in sorted(manifest.items()):
            keys = [key for plant in plants for key in PLANTED_MODES[plant]]
            for assignment in Assignment.objects.filter(study=study, run=runs[name]).select_related("annotator"):
                annotation = annotation_for(assignment=assignment)
                labels = [LabelInput(code_id=codes[k].pk, rationale=f"planted: {k}") for k in keys]
                annotation_save(annotation=annotation, actor=assignment.annotator, version=annotation.version,
                                no_failure=not labels, notes="[planted gold]", labels=labels)  # fmt: skip
                annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
    print(f"{len(manifest)} planted runs ({args.copies} per plant and clean), seed {args.seed}\n")
    call_command("evaluate_signatures", "--study", STUDY, *(["--csv", args.csv] if args.csv else []))


def real(folders: list[Path], codebook, csv: str | None) -> None:
    """Real task folders against the study's own published decisions."""
    report = import_paths(paths=folders)
    failed = [r.message for r in report.results if r.status == "failed"]
    if failed:
        sys.exit("\n".join(failed))
    annotators = list(User.objects.filter(username__in=["annotator1", "annotator2", "annotator3"]))
    study = study_create(name="Published gold", codebook=codebook, annotators=annotators,
                         adjudicator=User.objects.get(username="senior"))  # fmt: skip
    out = io.StringIO()
    call_command("import_published", str(study.pk), *map(str, folders), "--as-gold", stdout=out)
    runs = Run.objects.filter(mode="concurrent").count()
    print(f"{runs} concurrent runs of {', '.join(map(str, folders))}, gold: their published records\n")
    call_command("evaluate_signatures", "--study", study.name, *(["--csv", csv] if csv else []))


if __name__ == "__main__":
    main()
