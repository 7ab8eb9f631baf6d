"""Training the suggestions classifier at the paper's scale (docs/suggestions.md, docs/performance.md).

Generates the paper-scale corpus (354 tasks × 3 agents × 2 modes = 2,124 runs, with events and
signature hits as import stores them), imports it, makes a study of its 1,062 concurrent runs with
synthetic final labels (each mode a run's signature hits support, kept with probability 0.7; a
random other mode with probability 0.1: bench data, not a claim about the detectors), then times
the worker's training of a model (`suggestions_train`: gather the features, 5 folds by task, the
final fit, store the predictions) and its phases. Prints the figures and the model's macro F1.

SQLite in a scratch directory by default; BENCH_DATABASE_URL=postgres://… for PostgreSQL (the
database is flushed first).

    .venv/bin/python bench/suggestions_bench.py [--seed N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.django_env import setup_django  # noqa: E402

scratch = setup_django("parallax-suggestions-bench-")

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from annotation.classifier import Params, train  # noqa: E402
from annotation.models import FinalCoding, FinalLabel  # noqa: E402
from annotation.selectors import suggestions as selectors  # noqa: E402
from annotation.services.studies import study_create  # noqa: E402
from annotation.services.suggestions import suggestions_train, suggestions_train_request  # noqa: E402
from taxonomy.services import codebook_load_default  # noqa: E402
from trajectories.generate import generate_corpus  # noqa: E402
from trajectories.models import Event, Run, SignatureHit  # noqa: E402
from trajectories.services import import_paths  # noqa: E402


def synthetic_gold(study, codebook, seed: int) -> None:
    rng = random.Random(seed)
    codes = {c.key: c for c in codebook.codes.filter(level="mode")}
    supported: dict[int, set[str]] = {}
    for run_id, modes in SignatureHit.objects.filter(run__studies=study).values_list("run_id", "modes"):
        supported.setdefault(run_id, set()).update(m for m in modes if m in codes)
    finals, labels = [], []
    for run_id in study.runs.order_by("pk").values_list("pk", flat=True):
        modes = {m for m in sorted(supported.get(run_id, ())) if rng.random() < 0.7}
        if rng.random() < 0.1:
            modes.add(rng.choice(sorted(codes)))
        finals.append(FinalCoding(study=study, run_id=run_id, provenance="adjudicated", no_failure=not modes))
        labels.append(sorted(modes))
    FinalCoding.objects.bulk_create(finals, batch_size=1000)
    rows = [
        FinalLabel(final=final, code=codes[key], rationale="[bench]", provenance="adjudicated")
        for final, modes in zip(FinalCoding.objects.filter(study=study).order_by("run_id"), labels, strict=True)
        for key in modes
    ]
    FinalLabel.objects.bulk_create(rows, batch_size=1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    codebook = codebook_load_default()
    start = time.perf_counter()
    generate_corpus(Path(scratch) / "corpus", scale="paper", seed=1)
    import_paths(paths=[Path(scratch) / "corpus"])
    print(f"corpus: {Run.objects.count():,} runs, {Event.objects.count():,} events, "
          f"{SignatureHit.objects.count():,} signature hits, generated and imported in "
          f"{time.perf_counter() - start:.1f} s ({connection.vendor})")  # fmt: skip
    users = [User.objects.create_user(f"bench-ann{i}") for i in (1, 2)]
    lead = User.objects.create_user("bench-senior")
    study = study_create(name="bench suggestions", codebook=codebook, annotators=users, adjudicator=lead)
    synthetic_gold(study, codebook, args.seed)
    print(f"study: {study.runs.count():,} runs, {study.finals.count():,} with final labels, "
          f"{FinalLabel.objects.filter(final__study=study).count():,} final labels")  # fmt: skip

    start = time.perf_counter()
    inputs = selectors.training_inputs(study=study)
    gold = selectors.gold_modes(study=study)
    gathered = time.perf_counter() - start
    start = time.perf_counter()
    result = train(inputs, gold, modes=selectors.mode_keys(study=study), detectors=selectors.detector_names(),
                   params=Params(seed=args.seed))  # fmt: skip
    trained = time.perf_counter() - start
    print(f"gather features: {gathered:.1f} s; cross-validate (5 folds by task) and fit: {trained:.1f} s; "
          f"{len(result.modes)} modes trained, {len(result.skipped)} skipped; macro F1 "
          f"{result.summary['macro_f1']:.3f} (synthetic labels)")  # fmt: skip

    model = suggestions_train_request(study=study, actor=lead, seed=args.seed, queue=False)
    start = time.perf_counter()
    model = suggestions_train(model_id=model.pk)
    print(f"the worker's whole job (suggestions_train, stored): {time.perf_counter() - start:.1f} s, "
          f"status {model.status}")  # fmt: skip


if __name__ == "__main__":
    main()
