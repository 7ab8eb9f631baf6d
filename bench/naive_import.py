"""Baseline: the obvious importer — one ORM save per context and per event, no batching.
Prints `<events> <seconds>` (work only)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from trajectories.formats.detect import discover  # noqa: E402
from trajectories.formats.records import ContextRecord, EventRecord, RunHeader  # noqa: E402
from trajectories.formats.registry import parser_for  # noqa: E402
from trajectories.models import AgentContext, AgentSystem, Benchmark, Event, Run, Task  # noqa: E402


def main(folder: str) -> None:
    start = time.perf_counter()
    events = 0
    for n, source in enumerate(discover([Path(folder)]).sources):
        contexts = {}
        run = None
        for record in parser_for(source.format).parse(source):
            if isinstance(record, RunHeader):
                bench, _ = Benchmark.objects.get_or_create(name="naive-" + record.benchmark)
                task, _ = Task.objects.get_or_create(benchmark=bench, external_id=record.task_id)
                agent, _ = AgentSystem.objects.get_or_create(name="naive-" + record.agent)
                run = Run.objects.create(
                    task=task,
                    agent=agent,
                    mode=record.mode,
                    source_format=source.format,
                    source_name=source.name,
                    content_hash=f"naive-{n}",
                )
            elif isinstance(record, ContextRecord) and record.id not in contexts:
                contexts[record.id] = AgentContext.objects.create(
                    run=run, external_id=record.id, role=record.role, label=record.label
                )
            elif isinstance(record, EventRecord):
                Event(
                    run=run,
                    context=contexts[record.context],
                    seq=record.seq,
                    timestamp=record.timestamp,
                    kind=record.kind,
                    tool=record.tool,
                    text=record.text,
                    files=record.files,
                ).save()
                events += 1
    print(events, time.perf_counter() - start)


if __name__ == "__main__":
    main(sys.argv[1])
