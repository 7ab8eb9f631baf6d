"""Importing many runs: small runs are written in groups, large ones streamed one by one.

A study corpus is thousands of small runs (~80 events each), so a run's fixed costs —
its statements, its savepoint, its commit — would dominate. Small runs are therefore parsed
and validated completely in memory (`RunWriter(plan_only=True)`: no database access), then a
group of them is written at once (`EventSink.send_group`): its runs, contexts and events by
background statements *while the next group is parsed* (on PostgreSQL one statement, which
also draws the ids; on SQLite three), and the group commits when they are done. A group closes
early once the database has finished the one before (see _EARLY_CLOSE_RUNS), so that neither
side waits for the other longer than it must.

Guarantees are those of importing each run in its own transaction:
  * a run that fails validation stores nothing and does not affect the others;
  * duplicates (same content) and clashes (same task, agent and mode) are found before writing;
    a second copy within one group is imported after the group, alone, to get the exact answer;
  * if the database refuses a group anyway (a concurrent import of the same runs), the group is
    rolled back to its savepoint and every run in it is imported again one by one;
  * results are reported only once their group is committed: a crash loses at most the group
    in flight, and a retry imports it (the runs already committed come back as duplicates).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, transaction

from . import bulk
from .formats.detect import parser_for
from .formats.records import FormatError, RunSource
from .models import ImportBatch, Run
from .writer import DUPLICATE_MESSAGE, Lookups, Plan, RunResult, RunWriter, clash_error, content_hash, unreadable

# A group closes at settings.PARALLAX_IMPORT_GROUP_RUNS runs or GROUP_BYTES of source, or earlier,
# once it holds these many runs (the first group: nothing is being written while it is planned),
# as soon as the database has finished writing the group before it: the database never waits
# while runs it could write sit parsed, and groups stay large while the database is the slower.
_FIRST_GROUP_RUNS = 16
_EARLY_CLOSE_RUNS = 64


@dataclass
class _Group:
    """Runs parsed and validated, waiting to be written; then written, waiting to commit."""

    entries: list[tuple[int, RunSource]] = field(default_factory=list)  # (position, source)
    nbytes: int = 0


@dataclass
class _Planned:
    """A group parsed and validated: its plans, and the sizes of the id blocks it needs (run
    and context indexes; those of runs that failed stay unused)."""

    plans: list[tuple[int, Plan]]
    n_runs: int
    n_contexts: int


class GroupImporter:
    def __init__(
        self,
        *,
        sources: list[RunSource],
        batch: ImportBatch | None,
        report: Callable,  # (position, RunResult) → None, called once the result is committed
        run_import: Callable,  # services.run_import, for large runs and fallbacks
    ):
        self.sources = sources
        self.batch = batch
        self.report = report
        self.run_import = run_import
        self.lookups = Lookups()
        # state of the group written but not yet committed
        self._atomic = None
        self._savepoint = None
        self._sink: bulk.EventSink | None = None
        self._written: list[tuple[int, Plan]] = []
        self._pending_results: list[tuple[int, object]] = []
        self._after: list[tuple[int, RunSource]] = []  # second copies, imported alone after the group
        self._groups = 0  # groups formed so far

    # -- driver ------------------------------------------------------------------------
    def run(self) -> None:
        with bulk.import_runtime():
            self._run()

    def _run(self) -> None:
        try:
            position = 0
            while position < len(self.sources):
                group, position = self._next_group(position)
                if group is None:  # a large run: stream it on its own
                    self._commit()
                    source = self.sources[position]
                    position += 1
                    self.report(position, self.run_import(source=source, batch=self.batch, lookups=self.lookups))
                    continue
                formed = len(group.entries)
                planned = self._plan(group)
                position -= formed - planned.n_runs  # closed early: the rest goes to the next group
                self._commit()
                self._write(planned)
            self._commit()
        except BaseException:
            self._abandon()
            raise

    def _next_group(self, position: int) -> tuple[_Group | None, int]:
        # settings.PARALLAX_IMPORT_*: a source is "small" (planned in memory, written in a group)
        # below SMALL_RUN_BYTES; a group holds at most GROUP_RUNS runs and GROUP_BYTES of source
        # (and closes earlier while it is planned: see _EARLY_CLOSE_RUNS).
        group = _Group()
        self._groups += 1
        while (
            position < len(self.sources)
            and len(group.entries) < settings.PARALLAX_IMPORT_GROUP_RUNS
            and group.nbytes < settings.PARALLAX_IMPORT_GROUP_BYTES
        ):
            source = self.sources[position]
            size = _size(source)
            if size >= settings.PARALLAX_IMPORT_SMALL_RUN_BYTES:
                break
            group.entries.append((position + 1, source))
            group.nbytes += size
            position += 1
        return (group if group.entries else None), position

    # -- planning (no database) ---------------------------------------------------------
    def _plan(self, group: _Group) -> _Planned:
        # (the previous group's events may still be being written: no query here)
        plans: list[tuple[int, Plan]] = []
        n_contexts = 0
        for index, (pos, source) in enumerate(group.entries):
            if index >= (_FIRST_GROUP_RUNS if self._groups == 1 else _EARLY_CLOSE_RUNS) and not self._writing():
                group.entries = group.entries[:index]  # the database is idle: hand it what is ready
                break
            try:
                digest = content_hash(source.files, display=source.display)
            except OSError as exc:
                self._pending_results.append((pos, unreadable(source, exc)))
                continue
            writer = RunWriter(
                source, digest, self.batch, None, plan_only=True, run_index=index, context_base=n_contexts
            )
            try:
                plans.append((pos, writer.plan(parser_for(source.format).parse(source))))
            except FormatError as exc:
                self._pending_results.append((pos, RunResult(source.name, "failed", message=exc.describe())))
            if writer.sink is not None:
                n_contexts = writer.sink.next_context  # indexes of failed runs stay unused
        return _Planned(plans, len(group.entries), n_contexts)

    def _writing(self) -> bool:
        """Whether the database is still writing the group in flight."""
        return self._sink is not None and self._sink.busy()

    # -- writing ------------------------------------------------------------------------
    def _write(self, planned: _Planned) -> None:
        """Write a group's runs and contexts now and start its events; commit comes later."""
        plans = planned.plans
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self._savepoint = transaction.savepoint_create()
        try:
            ready, results, later = self._select(plans)
            self._store(ready, planned)
        except DatabaseError:
            # Refused (a concurrent import of the same runs): import them one by one instead.
            self._fall_back([(pos, plan.source) for pos, plan in plans])
            return
        self._pending_results += results
        self._after += later

    def _select(self, plans: list[tuple[int, Plan]]) -> tuple[list, list, list]:
        """Which plans to write: not already stored, not clashing; ids of tasks and agents."""
        existing = _existing_hashes([plan.run.content_hash for _, plan in plans])
        self.lookups.prefetch([plan.header for _, plan in plans if plan.run.content_hash not in existing])
        ready: list[tuple[int, Plan]] = []
        results: list[tuple[int, object]] = []
        later: list[tuple[int, RunSource]] = []
        seen: set = set()
        for pos, plan in plans:
            name, digest = plan.source.name, plan.run.content_hash
            if digest in existing:
                results.append((pos, RunResult(name, "duplicate", run_id=existing[digest], message=DUPLICATE_MESSAGE)))
                continue
            try:
                task = self.lookups.task(plan.header, name=name)
                agent_id = self.lookups.agent(plan.header)
            except FormatError as exc:
                results.append((pos, RunResult(name, "failed", message=exc.describe())))
                continue
            plan.run.task, plan.run.agent_id = task, agent_id
            key = (task.pk, agent_id, plan.run.mode)
            if digest in seen or key in seen:
                later.append((pos, plan.source))  # a second copy: imported alone after the group
                continue
            seen.update((digest, key))
            ready.append((pos, plan))
        clashes = _existing_runs({plan.run.task_id for _, plan in ready})
        kept = []
        for pos, plan in ready:
            clash = clashes.get((plan.run.task_id, plan.run.agent_id, plan.run.mode))
            if clash is None:
                kept.append((pos, plan))
                continue
            error = clash_error(
                task=plan.run.task, agent=plan.header.agent, mode=plan.run.mode, clash=clash, file=plan.source.name
            )
            results.append((pos, RunResult(plan.source.name, "failed", message=error.describe())))
        return kept, results, later

    def _store(self, ready: list[tuple[int, Plan]], planned: _Planned) -> None:
        if not ready:
            return
        contexts = [row for _, plan in ready for row in plan.contexts]
        events = [row for _, plan in ready for row in plan.events]
        for _, plan in ready:
            plan.contexts, plan.events = [], []
        self._written = ready
        self._sink = bulk.event_sink()
        runs = [(plan.run_index, plan.run) for _, plan in ready]
        self._sink.send_group(runs, contexts, events, planned.n_runs, planned.n_contexts)

    def _fall_back(self, retry: list[tuple[int, RunSource]]) -> None:
        if self._sink is not None:
            self._sink.abort()
        transaction.savepoint_rollback(self._savepoint)
        self.lookups.forget()
        self._written = []
        self._after = retry + self._after

    def _commit(self) -> None:
        """Finish the group in flight: its events written, commit, then report its results."""
        if self._atomic is None:
            self._flush_results()
            return
        try:
            if self._sink is not None:
                self._sink.finish()
        except DatabaseError:
            self._fall_back([(pos, plan.source) for pos, plan in self._written])
        for pos, plan in self._written:
            run = plan.run
            self._pending_results.append(
                (
                    pos,
                    RunResult(plan.source.name, "imported", run_id=run.pk, warnings=run.warnings, events=run.n_events),
                )
            )
        self.lookups.keep()
        self._close(commit=True)
        self._flush_results()

    def _close(self, *, commit: bool) -> None:
        atomic, self._atomic, self._sink, self._written = self._atomic, None, None, []
        if commit:
            transaction.savepoint_commit(self._savepoint)
            atomic.__exit__(None, None, None)
        else:
            error = RuntimeError("import abandoned")
            atomic.__exit__(RuntimeError, error, None)

    def _flush_results(self) -> None:
        results, self._pending_results = self._pending_results, []
        for pos, result in sorted(results, key=lambda item: item[0]):
            self.report(pos, result)
        after, self._after = self._after, []
        for pos, source in sorted(after, key=lambda item: item[0]):
            self.report(pos, self.run_import(source=source, batch=self.batch, lookups=self.lookups))

    def _abandon(self) -> None:
        if self._atomic is not None:
            if self._sink is not None:
                self._sink.abort()
            self.lookups.forget()
            self._close(commit=False)


def _size(source: RunSource) -> int:
    total = 0
    for path in source.files:
        try:
            total += Path(path).stat().st_size
        except OSError:
            return 0  # unreadable: the group's content hash reports it
    return total


def _existing_hashes(digests: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(digests), 500):
        chunk = digests[start : start + 500]
        found.update(Run.objects.filter(content_hash__in=chunk).values_list("content_hash", "pk"))
    return found


def _existing_runs(task_ids: set[int]) -> dict[tuple, tuple[int, str]]:
    if not task_ids:
        return {}
    return {
        (task_id, agent_id, mode): (pk, name)
        for task_id, agent_id, mode, pk, name in Run.objects.filter(task_id__in=task_ids).values_list(
            "task_id", "agent_id", "mode", "pk", "source_name"
        )
    }
