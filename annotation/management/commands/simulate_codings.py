"""Demo only: code part of a study with synthetic labels, through the real services, so that the
dashboards, discussions and adjudication queue have something to show. Every rationale says so."""

from __future__ import annotations

import random

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Coalesce, NullIf

from annotation.management.studies import study_from_ref
from annotation.models import Assignment, Discussion
from annotation.selectors.queue import annotation_for
from annotation.services.coding import LabelInput, annotation_save, annotation_submit
from annotation.services.review import discussion_escalate
from trajectories.artifacts import anchor_text
from trajectories.models import Event, Run


class Command(BaseCommand):
    help = "DEMO ONLY: submit synthetic codings for a fraction of a study's runs (every annotator of each)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or name.")
        parser.add_argument("--fraction", type=float, default=0.5)
        parser.add_argument("--agree", type=float, default=0.75, help="Chance a coder picks the first's modes.")
        parser.add_argument("--escalate", type=float, default=0.5, help="Share of discussions to escalate.")
        parser.add_argument("--seed", type=int, default=0)

    @transaction.atomic  # all or nothing; and the study's statistics are computed once, when it commits
    def handle(self, *args, **options) -> None:
        study = study_from_ref(options["study"])
        rng = random.Random(options["seed"])
        # Episodes come from a stream of their own, so the modes picked stay what this seed always gave.
        episodes = random.Random(options["seed"] + 1)
        modes = list(study.codebook.codes.filter(level="mode").order_by("position"))
        run_ids = sorted(set(Assignment.objects.filter(study=study).values_list("run_id", flat=True)))
        chosen = run_ids[: int(len(run_ids) * options["fraction"])]
        coded = 0
        for run_id in chosen:
            pair = list(Assignment.objects.filter(study=study, run_id=run_id).select_related("annotator"))
            base = rng.sample(modes, rng.choice((0, 1, 1, 2)))
            # now and then the run shows a mode in a second episode; a coder now and then counts otherwise
            shown = {m.pk: 2 if episodes.random() < 0.15 else 1 for m in base}
            lines = _cited_lines(run_id)
            for index, assignment in enumerate(pair):
                picked = base if index == 0 or rng.random() < options["agree"] else rng.sample(modes, 1)
                annotation = annotation_for(assignment=assignment)
                if annotation.is_submitted:
                    continue
                labels = []
                for m in picked:
                    count = shown.get(m.pk, 1)
                    if episodes.random() < 0.1:
                        count = 3 - count  # 1 <-> 2
                    for k in range(1, count + 1):
                        cited = (rng if k == 1 else episodes).choice(lines) if lines else None
                        labels.append(
                            LabelInput(
                                code_id=m.pk,
                                rationale=f"[demo data] synthetic rationale for {m.name}"
                                + (f", episode {k}." if k > 1 else "."),
                                evidence=[anchor_text(Run.Mode.CONCURRENT, *cited)] if cited else [],
                            )
                        )
                annotation_save(
                    annotation=annotation,
                    actor=assignment.annotator,
                    version=annotation.version,
                    no_failure=not labels,
                    notes="[demo data]",
                    labels=labels,
                )
                annotation_submit(annotation=annotation, actor=assignment.annotator, version=annotation.version)
                coded += 1
        for discussion in Discussion.objects.filter(study=study, status=Discussion.Status.OPEN).order_by("pk"):
            if rng.random() < options["escalate"]:
                annotator = Assignment.objects.filter(study=study, run=discussion.run).first().annotator
                discussion_escalate(discussion=discussion, actor=annotator)
        self.stdout.write(self.style.SUCCESS(f"[demo] submitted {coded} synthetic codings on {len(chosen)} runs"))


def _cited_lines(run_id: int) -> list[tuple[str, int]]:
    """(log file, line) of events of a run, for evidence anchors that resolve."""
    return list(
        Event.objects.filter(run_id=run_id, source_line__isnull=False)
        .annotate(line_file=Coalesce(NullIf("source_file", Value("")), "context__source_file"))
        .exclude(line_file="")
        .order_by("context__position", "seq")
        .values_list("line_file", "source_line")[:200]
    )
