"""Reads for views, API and exports; every list is a fixed number of queries."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import Case, Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, TextField, Value, When, Window
from django.db.models.functions import RowNumber
from django.urls import reverse

from .artifacts import Anchor, AnchorError, AnchorUnchecked, diff_files, parse_anchor
from .benchmarks import canonical_benchmark
from .evaluation import NOT_OK, PASSING, SKIPPED
from .models import AgentContext, AgentSystem, Benchmark, Event, Run, RunFile, SignatureHit, Task, TestOutcome
from .signatures import DETECTOR_VERSION

RUN_FILTERS = ("benchmark", "agent", "mode", "difficulty", "paired")


# -- the pair: a run and its twin (same task and agent, the other mode) --------------------


def _twin_of_outer() -> QuerySet[Run]:
    """The twin of the run in the enclosing query (for Exists/Subquery)."""
    return Run.objects.filter(task=OuterRef("task"), agent=OuterRef("agent")).exclude(mode=OuterRef("mode"))


def run_twin(*, run: Run) -> Run | None:
    return (
        Run.objects.select_related("task__benchmark", "agent")
        .filter(task_id=run.task_id, agent_id=run.agent_id, mode=run.twin_mode)
        .first()
    )


def twins(*, runs: QuerySet[Run]) -> QuerySet[Run]:
    """The twins of `runs` (one query, however many runs: a study's, say)."""
    return Run.objects.filter(
        Exists(runs.filter(task=OuterRef("task"), agent=OuterRef("agent")).exclude(mode=OuterRef("mode")))
    )


def paired_concurrent_runs() -> QuerySet[Run]:
    """Every concurrent run that has its sequential twin: what a study codes by default."""
    return Run.objects.filter(Exists(_twin_of_outer()), mode=Run.Mode.CONCURRENT).order_by("pk")


def pair_sides(run: Run) -> dict:
    """The concurrent run on the left, its sequential twin on the right (either may be missing):
    what the pair, annotate, adjudicate and pilot pages show."""
    twin = run_twin(run=run)
    concurrent, sequential = (run, twin) if run.mode == Run.Mode.CONCURRENT else (twin, run)
    sides = {}
    for key, side in (("left", concurrent), ("right", sequential)):
        sides[key] = None if side is None else {"run": side, "artifacts": run_artifacts(run=side)}
    tests = run_tests(runs=[side["run"] for side in sides.values() if side], limit=PAIR_TESTS_SHOWN)
    for side in filter(None, sides.values()):
        urls = {a["file"].path: a["url"] for a in side["artifacts"]}
        side["tests"] = _with_links(side["run"], tests[side["run"].pk], urls)
    return {
        "run": run,
        "twin": twin,
        **sides,
        "pair_rows": [
            {"mode": Run.Mode.CONCURRENT, "run": concurrent},
            {"mode": Run.Mode.SEQUENTIAL, "run": sequential},
        ],
    }


def signatures_outdated(run: Run) -> str:
    """What a page says of a run whose hits older rules found ("" when these detectors found them, or
    none ever looked): bumping DETECTOR_VERSION makes every stored hit outdated until it is recomputed."""
    version = run.signatures_version
    if version is None or version == DETECTOR_VERSION:
        return ""
    return (
        f"Found by older rules (detectors version {version}; these are version {DETECTOR_VERSION}): "
        "manage.py detect_signatures --stale recomputes them."
    )


def run_signature_rows(*, runs: list[Run | None]) -> list[dict]:
    """The signature hits of these runs (one query), as one row per run that exists, in the
    order given: {run, hits, note, outdated}. The note says why a run has no hits; outdated, that
    older rules found them (signatures_outdated)."""
    present = [r for r in runs if r is not None]
    hits: dict[int, list[SignatureHit]] = {r.pk: [] for r in present}
    for hit in SignatureHit.objects.filter(run__in=present).order_by("run_id", "position"):
        hits[hit.run_id].append(hit)
    rows = []
    for run in present:
        if run.signatures_version is None:
            note = "not checked yet (manage.py detect_signatures)"
        else:
            note = run.signatures_note or "no signature found"
        rows.append({"run": run, "hits": hits[run.pk], "note": note, "outdated": signatures_outdated(run)})
    return rows


def event_anchor(*, run: Run, source_file: str, line: int) -> str:
    """The evidence anchor of the event read from `line` of an agent's log: what the events list's
    "cite" writes (the `cite_anchor` filter of templates/trajectories/partials/events.html)."""
    if source_file:
        return f"{'parallel' if run.mode == Run.Mode.CONCURRENT else 'serial'}/{source_file}:{line}"
    return f"{run.source_name}:{line}"


def run_hints(*, run: Run) -> list[dict]:
    """A run's hits for the coding page's hints panel, in order: {hit, evidence}, each evidence item
    {agent, seq, file, time, note, source, line, anchor} with the anchor of its event, or of the run
    file's line it names (the final patch's header of a file); "" when it names neither or the event
    has no source line. Two queries, however many hits."""
    hits = list(SignatureHit.objects.filter(run=run).order_by("position"))
    wanted = {(ev["agent"], ev["seq"]) for hit in hits for ev in hit.evidence if ev.get("seq") is not None}
    anchors: dict[tuple[str, int], str] = {}
    if wanted:
        which = Q()
        for agent, seq in wanted:
            which |= Q(context__external_id=agent, seq=seq)
        events = Event.objects.filter(which, context__run=run, source_line__isnull=False).values_list(
            "context__external_id", "seq", "context__source_file", "source_file", "source_line"
        )
        for agent, seq, agent_file, own_file, line in events:
            anchors[agent, seq] = event_anchor(run=run, source_file=own_file or agent_file, line=line)

    def anchor(ev: dict) -> str:
        if ev.get("seq") is not None:
            return anchors.get((ev["agent"], ev["seq"]), "")
        if ev.get("source") and ev.get("line"):
            return event_anchor(run=run, source_file=ev["source"], line=ev["line"])
        return ""

    return [{"hit": hit, "evidence": [{**ev, "anchor": anchor(ev)} for ev in hit.evidence]} for hit in hits]


# -- lists and pages -------------------------------------------------------------------------


def run_filters(params: Mapping[str, str]) -> dict[str, str]:
    """The run filters of a query string, trimmed; a benchmark under its one name, so that a link with
    another spelling (`?benchmark=swebench_verified`) still finds the benchmark's runs."""
    filters = {key: params.get(key, "").strip() for key in (*RUN_FILTERS, "q")}
    filters["benchmark"] = canonical_benchmark(filters["benchmark"])
    return filters


def run_list(*, filters: dict[str, str] | None = None) -> QuerySet[Run]:
    """Runs with task/agent joined and an `is_paired` flag (twin of the other mode exists)."""
    filters = filters or {}
    qs = Run.objects.select_related("task__benchmark", "agent").annotate(is_paired=Exists(_twin_of_outer()))
    if filters.get("benchmark"):
        qs = qs.filter(task__benchmark__name=filters["benchmark"])
    if filters.get("agent"):
        qs = qs.filter(agent__name=filters["agent"])
    if filters.get("mode"):
        qs = qs.filter(mode=filters["mode"])
    if filters.get("difficulty"):
        qs = qs.filter(task__difficulty=filters["difficulty"])
    if filters.get("paired") == "yes":
        qs = qs.filter(is_paired=True)
    elif filters.get("paired") == "no":
        qs = qs.filter(is_paired=False)
    if filters.get("q"):
        qs = qs.filter(Q(task__external_id__icontains=filters["q"]) | Q(source_name__icontains=filters["q"]))
    return qs.order_by(*RUN_LIST_ORDER)


RUN_LIST_ORDER = ("task__benchmark__name", "task__external_id", "agent__name", "mode", "pk")


def run_contexts(*, run: Run, offset: int = 0, limit: int = 100) -> list[AgentContext]:
    """One page of a run's agents in order of appearance, plus one to tell whether more follow."""
    return list(AgentContext.objects.filter(run=run).order_by("position")[offset : offset + limit + 1])


def run_lanes(*, run: Run) -> list[AgentContext]:
    """Every agent of a run, with only what the timeline draws."""
    return list(
        AgentContext.objects.filter(run=run)
        .order_by("position")
        .only(
            "pk",
            "label",
            "external_id",
            "role",
            "depth",
            "status",
            "started_at",
            "ended_at",
            "slot",
            "attempt",
            "attempts",
        )  # fmt: skip
    )


def context_events(
    *, context: AgentContext, offset: int = 0, limit: int = 100, kinds: list[str] | None = None
) -> list[Event]:
    qs = Event.objects.filter(context=context).order_by("seq")
    if kinds:
        qs = qs.filter(kind__in=kinds)
    return list(qs[offset : offset + limit + 1])  # one extra tells whether there is a next page


@dataclass(frozen=True)
class Target:
    """What a spawn, wait or join names: an agent of the run, or a workflow and the agents it ran."""

    name: str
    agents: tuple[AgentContext, ...]

    @property
    def workflow(self) -> bool:
        return len(self.agents) != 1 or self.agents[0].external_id != self.name


def event_targets(*, run: Run, events: list[Event]) -> dict[str, list[Target]]:
    """For each target named by these events ("a", "a,b", a workflow's run id): the agents it
    names, in the run's order (a workflow's in slot and attempt order). One query."""
    names = {name for e in events for name in e.target.split(",") if name}
    if not names:
        return {}
    found: dict[str, list[AgentContext]] = {name: [] for name in names}
    agents = (
        AgentContext.objects.filter(Q(external_id__in=names) | Q(workflow__in=names), run=run)
        .order_by("position")
        .only("pk", "external_id", "label", "status", "workflow", "slot", "attempt", "attempts", "position")
    )
    for agent in agents:
        for name in (agent.external_id, agent.workflow):
            if name in found:
                found[name].append(agent)
    return {
        e.target: [Target(name, tuple(found.get(name, ()))) for name in e.target.split(",") if name]
        for e in events
        if e.target
    }


DIFFICULTY_ORDER = {value: i for i, value in enumerate(Task.Difficulty.values)}


def filter_choices() -> dict[str, list[str]]:
    """The run list's dropdowns, each value once. `order_by()` before `distinct()`: Task's default
    ordering (benchmark name, task id) would join the SELECT DISTINCT and repeat a difficulty once
    per task."""
    difficulties = Task.objects.exclude(difficulty="").order_by().values_list("difficulty", flat=True).distinct()
    return {
        "benchmarks": list(Benchmark.objects.order_by("name").values_list("name", flat=True)),
        "agents": list(AgentSystem.objects.order_by("name").values_list("name", flat=True)),
        "difficulties": sorted(difficulties, key=lambda d: (DIFFICULTY_ORDER.get(d, len(DIFFICULTY_ORDER)), d)),
    }


# -- a run's files and the anchors that cite them ---------------------------------------------

ARTIFACT_ORDER = ("final", "patch", "evaluation", "test_output", "prompt", "status", "cell", "other")


INLINE_KINDS = ("final", "patch")  # read whole for the panel; others open on their own page


def run_artifacts(*, run: Run) -> list[dict]:
    """A run's cell artifacts (not its logs) as the coding view lists them: the final answer's
    text, the patch's files and line counts; the rest (evaluation, test output, prompt, harness
    status) as links. One query."""
    files = (
        RunFile.objects.filter(run=run)
        .exclude(kind=RunFile.Kind.LOG)
        .defer("content")
        .annotate(
            inline_text=Case(
                When(kind__in=INLINE_KINDS, then=F("content")), default=Value(""), output_field=TextField()
            )
        )
        .order_by("path")
    )
    items = []
    files = sorted(files, key=lambda f: ARTIFACT_ORDER.index(f.kind) if f.kind in ARTIFACT_ORDER else 99)
    kinds = Counter(file.kind for file in files)
    for file in files:
        item = {"file": file, "url": reverse("trajectories:run_file", kwargs={"run_id": run.pk, "file_id": file.pk})}
        # Two files of a kind (report.json beside summary.json, run_instance.log beside test_output.txt) are told
        # apart by their names: each is a tab of its own.
        item["label"] = file.get_kind_display().capitalize() + (f" · {file.name}" if kinds[file.kind] > 1 else "")
        if file.kind in INLINE_KINDS:
            item.update(artifact_digest(file.kind, file.inline_text))
        items.append(item)
    return items


def artifact_digest(kind: str, content: str) -> dict:
    """What the panel shows of an artifact without opening it."""
    if kind == "final":
        return {"text": content}
    if kind == "patch":
        diff = diff_files(content)
        return {"diff_files": diff, "added": sum(f.added for f in diff), "removed": sum(f.removed for f in diff)}
    return {}


LOG_WINDOW = 3  # lines shown before and after the cited ones
LOG_HEAD = 200  # lines shown of a log opened at no line
CONTEXT_LINE_CHARS = 2000  # a line around the cited ones is cut here; the cited ones are shown whole


def cited_json(lines: list[tuple[int, str, bool]]) -> list[tuple[int, str]]:
    """The cited lines that are long JSON records, indented for reading (the line itself stays as written)."""
    shown = []
    for number, text, cited in lines:
        if cited and len(text) > 200 and text.lstrip()[:1] in "{[":
            try:
                shown.append((number, json.dumps(json.loads(text), indent=2, ensure_ascii=False)))
            except ValueError:
                continue
    return shown


def log_lines(*, file: RunFile, start: int | None, end: int | None) -> list[tuple[int, str, bool]]:
    """Raw lines of a stored log as (number, text, cited): the cited lines with a few around them,
    or the log's first lines when none is cited. A line past the text kept of a cut log is absent."""
    lines = file.content.splitlines()
    if start is None:
        first, last = 1, min(len(lines), LOG_HEAD)
    else:
        first, last = max(1, start - LOG_WINDOW), min(len(lines), (end or start) + LOG_WINDOW)
    shown = []
    for number in range(first, last + 1):
        cited = start is not None and start <= number <= (end or start)
        text = lines[number - 1]
        if not cited and len(text) > CONTEXT_LINE_CHARS:
            text = text[:CONTEXT_LINE_CHARS] + f" … [{len(text) - CONTEXT_LINE_CHARS:,} more characters]"
        shown.append((number, text, cited))
    return shown


# -- a run's tests (TestOutcome rows, stored at import) ------------------------------------------

PAIR_TESTS_SHOWN = 200  # per run on the pair page; the rest are counted and open with their file
FILE_TESTS_SHOWN = 500


def _failures_first() -> Case:
    """Failures, errors and tests without a result first, then skipped, then passed."""
    return Case(
        When(outcome__in=NOT_OK, then=Value(0)),
        When(outcome=SKIPPED, then=Value(1)),
        default=Value(2),
        output_field=IntegerField(),
    )


def run_tests(*, runs: list[Run], limit: int) -> dict[int, dict]:
    """The test list of each run (its primary rows), failures first, at most `limit` rows a run, and
    how many rows it has: {run id: {"rows": [...], "listed": n}}. One query, however many tests."""
    found: dict[int, dict] = {run.pk: {"rows": [], "listed": 0} for run in runs}
    if not runs:
        return found
    order = [_failures_first().asc(), F("position").asc()]
    rows = (
        TestOutcome.objects.filter(run__in=[run.pk for run in runs], primary=True)
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("run_id")], order_by=order),
            listed=Window(Count("*"), partition_by=[F("run_id")]),
        )
        .filter(rank__lte=limit)
        .order_by("run_id", "rank")
    )
    for row in rows:
        found[row.run_id]["rows"].append(row)
        found[row.run_id]["listed"] = row.listed
    return found


def _with_links(run: Run, tests: dict, urls: dict[str, str]) -> dict:
    """A run's test list for the pair page: each row with the link to its line, the file it was
    read from, whether any row has a group (the column is shown then), how many are not shown."""
    rows = tests["rows"]
    for row in rows:
        url = urls.get(row.source)
        row.url = f"{url}?line={row.line}#L{row.line}" if url and row.line else url
    source = rows[0].source if rows else run.tests_source
    return {
        **tests,
        "source": source,
        "source_name": source.rsplit("/", 1)[-1],
        "source_url": urls.get(source, ""),
        "counts_from": run.tests_source,
        "counts_name": run.tests_source.rsplit("/", 1)[-1],
        "counts_url": urls.get(run.tests_source, ""),
        "grouped": any(row.group for row in rows),
        "more": tests["listed"] - len(rows),
    }


def file_tests(*, file: RunFile) -> dict:
    """The tests read from one of a run's files, failures first (at most FILE_TESTS_SHOWN), and
    their counts. Two queries."""
    rows = TestOutcome.objects.filter(run_id=file.run_id, source=file.path)
    counts = rows.aggregate(
        listed=Count("pk"),
        passed=Count("pk", filter=Q(outcome__in=PASSING)),
        skipped=Count("pk", filter=Q(outcome=SKIPPED)),
    )
    shown = list(rows.order_by(_failures_first(), "position")[:FILE_TESTS_SHOWN])
    total = counts["listed"] - counts["skipped"]
    return {
        "tests": shown,
        "counts": {"passed": counts["passed"], "failed": total - counts["passed"], "total": total} if shown else {},
        "grouped": any(row.group for row in shown),
        "more": counts["listed"] - len(shown),
    }


def run_logs(*, run: Run) -> list[RunFile]:
    return list(RunFile.objects.filter(run=run, kind=RunFile.Kind.LOG).order_by("path"))


@dataclass(frozen=True)
class ResolvedAnchor:
    anchor: Anchor
    run: Run
    file: RunFile

    @property
    def url(self) -> str:
        path = reverse("trajectories:run_file", kwargs={"run_id": self.run.pk, "file_id": self.file.pk})
        return f"{path}?line={self.anchor.start}&end={self.anchor.end}#L{self.anchor.start}"


class PairAnchors:
    """Anchors of one run's pair checked against the files stored with each side: the twin and each
    side's file list are read once, when an anchor first needs them — so a page that shows many
    anchors of one pair (a published review cites a hundred) resolves them in three queries at most."""

    def __init__(self, run: Run):
        self.run = run
        self._sides: dict[str, Run | None] = {run.mode: run}
        self._files: dict[int, dict[str, RunFile]] = {}

    def _side(self, mode: str) -> Run | None:
        if mode not in self._sides:
            self._sides[mode] = run_twin(run=self.run)
        return self._sides[mode]

    def _files_of(self, side: Run) -> dict[str, RunFile]:
        if side.pk not in self._files:
            files = RunFile.objects.filter(run=side).only("pk", "run_id", "path", "kind", "n_lines").order_by("path")
            self._files[side.pk] = {file.path: file for file in files}
        return self._files[side.pk]

    def resolve(self, text: str, *, default_mode: str) -> ResolvedAnchor:
        """The file and line an anchor cites; AnchorError says what is wrong, naming the run and, for
        a file not found, the files it does have."""
        anchor = parse_anchor(text, default_mode=default_mode)
        side = self._side(anchor.mode)
        if side is None:
            raise AnchorError(f"{anchor.text}: the {anchor.mode} run of this pair is not imported")
        files = self._files_of(side)
        found = files.get(anchor.path)
        if found is None and anchor.path == side.source_name:  # a run read from one log, cited by its name
            logs = [file for file in files.values() if file.kind == RunFile.Kind.LOG]
            found = logs[0] if len(logs) == 1 else None
        if found is None:
            if not files:
                raise AnchorUnchecked(
                    f"{anchor.text}: cannot be checked: the {anchor.mode} run #{side.pk} was imported before "
                    "Parallax kept files (an admin can import its files again: they are added to the stored run)"
                )
            listed = ", ".join(list(files)[:6])
            raise AnchorError(
                f"{anchor.text}: no file {anchor.path!r} in the {anchor.mode} run #{side.pk} (its files: {listed})"
            )
        if found.n_lines is not None and anchor.end > found.n_lines:
            raise AnchorError(f"{anchor.text}: {found.path} has {found.n_lines} lines")
        return ResolvedAnchor(anchor=anchor, run=side, file=found)


def resolve_anchor(*, run: Run, text: str, default_mode: str) -> ResolvedAnchor:
    """An anchor typed or cited in a coding of `run`'s pair, checked against the files stored
    with the side it names: the file must be there and the line inside it (PairAnchors.resolve)."""
    return PairAnchors(run).resolve(text, default_mode=default_mode)


def mark_span(events: list[Event], mark: str) -> str:
    """Highlight a cited span (`mark=<agent>:<seq>:<start>:<end>`, characters of the event's text) on the
    event it names among `events`: that event gets `marked` = (before, span, after). Returns what is wrong
    with a mark that names no such characters ("" when it is shown, or when there is none)."""
    if not mark:
        return ""
    agent, *numbers = mark.rsplit(":", 3)  # an agent's id may hold a colon; the three numbers cannot
    try:
        seq, start, end = (int(n) for n in numbers)
    except ValueError:
        return f"the cited span {mark!r} is not <agent>:<seq>:<start>:<end>"
    for event in events:
        if event.context.external_id == agent and event.seq == seq:
            if not 0 <= start < end <= len(event.text):
                return f"the cited span {start}–{end} is outside event {seq}'s text ({len(event.text)} characters)"
            event.marked = (event.text[:start], event.text[start:end], event.text[end:])
            return ""
    return f"event {seq} of agent {agent!r} was not read from these lines"


def events_at_line(*, file: RunFile, start: int, end: int) -> list[Event]:
    """The events read from lines start..end of one of a run's logs: of the agents read from it, and the events
    that say they were read from it (a later round's transcript of an outer loop)."""
    contexts = AgentContext.objects.filter(run_id=file.run_id, source_file=file.path)
    in_file = Q(context__in=contexts, source_file="") | Q(source_file=file.path)
    return list(
        Event.objects.filter(in_file, run_id=file.run_id, source_line__gte=start, source_line__lte=end)
        .select_related("context")
        .order_by("source_line", "context__position", "seq")[:50]
    )
