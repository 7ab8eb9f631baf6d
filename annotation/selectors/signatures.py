"""A study's failure signatures against its gold (final labels): the rows that
stats/signature_eval.py measures. Four queries, whatever the study's size."""

from __future__ import annotations

from collections import defaultdict

from taxonomy.models import Code
from trajectories.models import SignatureHit
from trajectories.signatures import DETECTOR_MODES, DETECTOR_VERSION

from ..models import FinalCoding, FinalLabel, Study
from ..stats.signature_eval import RunSignatures, evaluate_signatures


def signature_runs(*, study: Study) -> list[RunSignatures]:
    """Every run of the study with a final coding: its gold mode keys, its stored hits, and whether
    they were computed by the current detectors (DETECTOR_VERSION). Three queries."""
    finals = FinalCoding.objects.filter(study=study)
    versions = dict(finals.order_by("run_id").values_list("run_id", "run__signatures_version"))
    gold: dict[int, set[str]] = defaultdict(set)
    for run_id, key in FinalLabel.objects.filter(final__study=study).values_list("final__run_id", "code__key"):
        gold[run_id].add(key)
    hits: dict[int, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    rows = SignatureHit.objects.filter(run_id__in=finals.values("run_id")).values_list("run_id", "detector", "modes")
    for run_id, detector, modes in rows.order_by("run_id", "position"):
        hits[run_id].append((detector, tuple(modes or ())))
    return [
        RunSignatures(
            run_id=run_id,
            gold=frozenset(gold.get(run_id, ())),
            hits=tuple(hits.get(run_id, ())),
            checked=version == DETECTOR_VERSION,
        )
        for run_id, version in versions.items()
    ]


def signature_evaluation(*, study: Study) -> dict:
    """Precision and recall of every detector, detector × mode and mode against the study's final
    labels, with the counts and how many runs were left out (docs/signatures.md). Four queries."""
    modes = dict(Code.objects.filter(codebook_id=study.codebook_id, level=Code.Level.MODE).values_list("key", "name"))
    evaluation = evaluate_signatures(signature_runs(study=study), detector_modes=DETECTOR_MODES, codebook_modes=modes)
    return {**evaluation, "detector_version": DETECTOR_VERSION}
