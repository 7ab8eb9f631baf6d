"""annotation 0017: records stored before their data was kept get their kind, data and artifact path."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import REAL

BEFORE, AFTER = ("annotation", "0016_hint_policy"), ("annotation", "0017_published_records_as_data")
FOLDER = REAL / "paper-annotations" / "nl2repo__dictdatabase__codex"


@pytest.mark.django_db(transaction=True)
def test_stored_records_get_their_kind_data_and_path(study):
    run = study.runs.order_by("pk").first()
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps.get_model("annotation", "PublishedRecord")
    texts = {name: (FOLDER / name).read_text(encoding="utf-8") for name in ("annotation.md", "review.json")}
    where = "/data/records/nl2repo__dictdatabase__codex"
    # as the loader stored them: the record's header, a review's summary with its kind
    made = [
        old.objects.create(
            study_id=study.pk,
            run_id=run.pk,
            name=f"{where}/annotation.md",
            text=texts["annotation.md"],
            header={"pair_id": "dictdatabase/codex"},
        ),
        old.objects.create(
            study_id=study.pk,
            run_id=run.pk,
            name=f"{where}/review.json",
            text=texts["review.json"],
            header={"kind": "review", "candidates": 32},
        ),
        old.objects.create(
            study_id=study.pk,
            run_id=run.pk,
            name="elsewhere/odd.md",
            text="pair_id: x/codex\n\n## Failure 1\ntop_label: A\n\na stray line\n",
            header={},
        ),
    ]
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps.get_model("annotation", "PublishedRecord")
    annotation, review, odd = (new.objects.get(pk=record.pk) for record in made)
    assert (annotation.kind, annotation.path) == ("annotation", "nl2repo/dictdatabase/codex/annotation.md")
    assert annotation.data["header"]["outcome_relation"] == "parallel_only_pass"
    assert annotation.data["failures"][0]["fields"]["third_label"] == "Final-Tree Overwrite"
    assert (review.kind, review.path) == ("review", "nl2repo/dictdatabase/codex/review.json")
    assert json.dumps(review.data) == json.dumps(json.loads(texts["review.json"]))
    assert (odd.kind, odd.path, odd.data) == ("annotation", "", {})  # refused by today's parser: kept, no data
    latest = MigrationExecutor(connection)  # a fresh loader: it knows 0017 is applied again
    latest.migrate(latest.loader.graph.leaf_nodes())
