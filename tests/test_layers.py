"""The apps depend one way, as docs/layout.md draws them: each imports only the apps below it. `config/`
is on top and only wires them together (settings, URLs, WSGI/ASGI, Celery): no app imports it. What the
apps share lives in `common/`, below them all, which imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each app, and the project's apps it may import: the ones below it.
BELOW = {
    "common": set(),
    "accounts": {"common"},
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
