"""Shared fixtures: named users per role, logged-in clients, Parallax JSONL writers."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"


def _artifact_folder() -> Path:
    """One complete task folder of the study's public artifact (swebench_verified/django__django-10999: three
    agents' parallel and serial cells, annotation.md and review.json). It stays outside the repository (its
    licence is unknown): `shared/data/real-trajectories/artifact-task-folder` beside the checkout (in any folder
    above it), or under $PARALLAX_SHARED_DATA. Tests read it in place and are skipped without it."""
    bases = [Path(os.environ["PARALLAX_SHARED_DATA"])] if os.environ.get("PARALLAX_SHARED_DATA") else []
    bases += [parent / "shared" / "data" for parent in Path(__file__).resolve().parents]
    for base in bases:
        folder = base / "real-trajectories" / "artifact-task-folder"
        if (folder / "swebench_verified" / "django__django-10999").is_dir():
            return folder
    return bases[0] / "real-trajectories" / "artifact-task-folder"  # absent: the tests say where they looked


ARTIFACT = _artifact_folder()
REQUIRE_SERVICES = os.environ.get("PARALLAX_REQUIRE_SERVICES") == "1"


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The cache holds login-throttle counters: tests must not inherit each other's failures."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="session")
def artifact_root() -> Path:
    """The artifact's task folder (_artifact_folder), or the test is skipped."""
    if not (ARTIFACT / "swebench_verified" / "django__django-10999").is_dir():
        pytest.skip(f"the artifact's task folder is absent ({ARTIFACT})")
    return ARTIFACT


@pytest.fixture
def artifact_runs(db, artifact_root):
    """The six runs of the artifact's task folder (three agents × parallel, serial), imported from it."""
    from trajectories.models import Run
    from trajectories.services import import_paths

    report = import_paths(paths=[artifact_root])
    assert Run.objects.count() == 6, report
    return artifact_root


@pytest.fixture
def artifact_study(artifact_runs, codebook, trio, adjudicator):
    """A 2-of-3 study of the task folder's three pairs, assigned."""
    from annotation.services.studies import study_assign, study_create

    study = study_create(name="Artifact", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    study_assign(study=study)
    return study


def skip_or_fail(reason: str) -> None:
    """CI sets PARALLAX_REQUIRE_SERVICES=1: a missing real service is then a failure, not a skip."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


def _user(username: str, role: str | None = None, **extra) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username, **extra)
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def annotator(db) -> User:
    return _user("ann1", ANNOTATOR)


@pytest.fixture
def adjudicator(db) -> User:
    return _user("senior", ADJUDICATOR)


@pytest.fixture
def admin_user(db) -> User:
    return _user("boss", ADMIN)


@pytest.fixture
def outsider(db) -> User:
    return _user("outsider")


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def annotator_client(annotator) -> Client:
    return client_for(annotator)


@pytest.fixture
def browser_client(adjudicator) -> Client:
    """A user who may browse the whole corpus (adjudicators and admins may)."""
    return client_for(adjudicator)


@pytest.fixture
def admin_client_(admin_user) -> Client:
    return client_for(admin_user)


def header(
    task: str = "t-1", mode: str = "concurrent", agent: str = "Codex", benchmark: str = "SWE-bench Verified", **outcomes
) -> dict:
    return {
        "type": "run",
        "format": "parallax/1",
        "task": {"benchmark": benchmark, "id": task, "difficulty": "hard"},
        "agent": {"system": agent, "model": "m"},
        "mode": mode,
        "outcomes": outcomes or {"task_pass": True, "tests_passed": 9, "tests_total": 10, "duration_s": 60.0},
    }


def ctx(cid: str, parent: str | None = None, start: str | None = None, end: str | None = None, **extra) -> dict:
    line = {
        "type": "context",
        "id": cid,
        "role": "main" if parent is None else "sub",
        "parent": parent,
        "label": extra.pop("label", cid),
    }
    if start:
        line["started_at"] = start
    if end:
        line["ended_at"] = end
    line.update(extra)
    return line


def ev(context: str, seq: int, ts: str, kind: str = "tool_call", **extra) -> dict:
    return {"type": "event", "context": context, "seq": seq, "ts": ts, "kind": kind, **extra}


def t(seconds: float) -> str:
    """Timestamp `seconds` after a fixed origin, ISO with Z."""
    minutes, sec = divmod(seconds, 60)
    return f"2026-08-01T10:{int(minutes):02d}:{sec:06.3f}Z"


def simple_run(task: str = "t-1", mode: str = "concurrent", agent: str = "Codex", n_sub: int = 2) -> list[dict]:
    lines = [header(task, mode, agent), ctx("main", start=t(0), end=t(100))]
    lines.append(ev("main", 0, t(0), "message", text="go"))
    for i in range(n_sub):
        cid = f"sub-{i}"
        lines.append(ev("main", i + 1, t(10 + i), "spawn", target=cid))
        lines.append(ctx(cid, "main", start=t(10 + i), end=t(50 + i)))
        lines.append(ev(cid, 0, t(12 + i), "file_write", tool="Edit", files=[f"src/f{i}.py"]))
    return lines


def write_jsonl(path: Path, lines: list[dict | bytes | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for line in lines:
            if isinstance(line, bytes):
                out.write(line + b"\n")
            elif isinstance(line, str):
                out.write(line.encode() + b"\n")
            else:
                out.write(orjson.dumps(line) + b"\n")
    return path


# -- studies --------------------------------------------------------------------------------


@pytest.fixture
def codebook(db):
    from taxonomy.services import codebook_load_default

    return codebook_load_default()


@pytest.fixture
def trio(db):
    from accounts.roles import ANNOTATOR

    return [_user(f"coder{i}", ANNOTATOR) for i in (1, 2, 3)]


@pytest.fixture
def study(db, tmp_path, codebook, trio, adjudicator):
    """Six paired tasks (12 runs) over two agents and two benchmarks, assigned."""
    from annotation.services.studies import study_assign, study_create
    from trajectories.services import import_paths

    for i in range(6):
        agent = "Codex" if i % 2 else "Kimi Code"
        bench = "LoopsBench" if i < 3 else "NL2Repo"
        for mode in ("concurrent", "sequential"):
            lines = simple_run(f"task-{i}", mode, agent, n_sub=2 if mode == "concurrent" else 0)
            lines[0]["task"]["benchmark"] = bench
            write_jsonl(tmp_path / "study" / f"{i}-{mode}.jsonl", lines)
    import_paths(paths=[tmp_path / "study"])
    created = study_create(name="S", codebook=codebook, annotators=trio, adjudicator=adjudicator)
    study_assign(study=created)
    return created


def mode_code(codebook, key: str):
    return codebook.codes.get(key=key)


CITED_LINE = {"lossy-handoff": 3, "stale-handoff": 4}  # lines of a `study` run's log the tests cite


def cite(run, key: str = "") -> str:
    """An anchor that resolves: a line of the log a `study` run was imported from."""
    return f"parallel/{run.source_name}:{CITED_LINE.get(key, 1)}"


def submit_disagreement(study, run_id: int, codebook, *, rationale: str = "r", evidence: tuple[str, ...] = ()):
    """Both annotators of a run submit different modes (slot 1: lossy-handoff, slot 2: stale-handoff);
    returns the discussion that opens."""
    from annotation.models import Assignment, Discussion
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save, annotation_submit

    pair = Assignment.objects.filter(study=study, run_id=run_id).order_by("slot")
    for assignment, key in zip(pair, ("lossy-handoff", "stale-handoff"), strict=True):
        annotation = annotation_for(assignment=assignment)
        label = LabelInput(code_id=mode_code(codebook, key).pk, rationale=rationale, evidence=list(evidence))
        annotation_save(
            annotation=annotation, actor=assignment.annotator, version=1, no_failure=False, notes="", labels=[label]
        )
        annotation_submit(annotation=annotation, actor=assignment.annotator, version=2)
    return Discussion.objects.get(study=study, run_id=run_id)


def pytest_sessionfinish(session, exitstatus):
    """Django removes the SQLite test database file but not its WAL side files."""
    import glob
    import tempfile

    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"parallax-test-{os.getpid()}.sqlite3*")):
        os.remove(path)
