"""The apps depend one way, as docs/layout.md draws them: each imports only the apps below it. `config/`
is on top and only wires them together (settings, URLs, WSGI/ASGI, Celery): no app imports it. What the
apps share lives in `common/`, below them all, which imports none of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps as django_apps

ROOT = Path(__file__).resolve().parents[1]

# Each app, and the project's apps it may import: the ones below it.
BELOW = {
    "common": set(),
    "accounts": {"common", "activity"},  # people and role changes are logged
    "activity": {"common"},
    "trajectories": {"common", "accounts", "activity"},
    "taxonomy": {"common", "accounts", "activity"},
    "annotation": {"common", "accounts", "activity", "trajectories", "taxonomy"},
}
PROJECT = {*BELOW, "config"}


def project_imports(app: str) -> dict[str, list[str]]:
    """The other project packages the modules of `app` import (absolute imports, wherever they are in a
    module, migrations included), each with the files that do."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / app).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                package = module.split(".")[0]
                if package in PROJECT and package != app:
                    found.setdefault(package, []).append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("app", sorted(BELOW))
def test_an_app_imports_only_the_apps_below_it(app):
    above = {package: files for package, files in project_imports(app).items() if package not in BELOW[app]}
    assert not above, f"{app} imports what is not below it: {above}"


def test_config_wires_every_app():
    # (and so the scan above does see imports)
    assert set(project_imports("config")) >= {"trajectories", "taxonomy", "annotation"}


def annotation_relations(app: str) -> set[str]:
    """The names by which the models of `app` reach the annotation app's tables (its foreign keys' reverse
    relations: `Run.assignments`, `Run.studies`, `Code.labels` …)."""
    return {
        field.name
        for model in django_apps.get_app_config(app).get_models()
        for field in model._meta.get_fields()
        if field.auto_created and field.is_relation and field.related_model._meta.app_label == "annotation"
    }


@pytest.mark.parametrize("app", ["trajectories", "taxonomy"])
def test_an_app_below_annotation_never_queries_its_tables_by_relation_name(app):
    """No `assignments__annotator=…`, `"studies__adjudicator"`, `run.studies.all()`: what studies and
    codings say about a run is the annotation app's to answer (trajectories asks through its `access`)."""
    names = annotation_relations(app)
    assert names, f"no relation of {app} to annotation found: the check would prove nothing"
    alternatives = "|".join(sorted(names))
    lookup = re.compile(rf"""\b({alternatives})__\w|["']({alternatives})["']|\.({alternatives})\.""")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if lookup.search(line)
    ]
    assert not found, "\n".join(found)


def test_no_test_module_imports_another():
    """What tests share is in tests/factories.py (builders) and the conftest.py files (fixtures): a test module
    imported by another runs its tests' module-level set-up twice and ties the two together."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            found += [f"{path.relative_to(ROOT)}: {m}" for m in modules if m.split(".")[-1].startswith("test_")]
    assert not found, "\n".join(found)
