"""taxonomy 0002: the one `example` of a code becomes its positive example, frozen codes included."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE, AFTER = ("taxonomy", "0001_codebooks"), ("taxonomy", "0002_code_examples_and_source")


@pytest.mark.django_db(transaction=True)
def test_old_example_is_kept_as_the_positive_example():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    codebook = old.get_model("taxonomy", "Codebook").objects.create(name="Old", version=1, status="frozen")
    category = old.get_model("taxonomy", "Code").objects.create(
        codebook=codebook, level="category", key="c", name="C", example="an old example"
    )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps
    code = new.get_model("taxonomy", "Code").objects.get(pk=category.pk)
    assert (code.positive_example, code.negative_example, code.source) == ("an old example", "", "")
    latest = MigrationExecutor(connection)  # a fresh loader: it knows 0002 is applied again
    latest.migrate(latest.loader.graph.leaf_nodes())  # back to the latest state for the next tests
