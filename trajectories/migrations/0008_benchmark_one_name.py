"""One Benchmark row per benchmark (trajectories/benchmarks.py): rows stored under other spellings
(`swebench_verified`, `SWE-bench Verified`, ...) are merged into the canonical one, their tasks
re-pointed. Two tasks with the same id under two spellings would become one task: the migration then
stops and changes nothing, naming them, rather than choose which one's runs to keep."""

from __future__ import annotations

from django.db import migrations
from django.db.models import Count

from trajectories.benchmarks import merge_plan

SHOWN_CLASHES = 10


class BenchmarkMergeRefused(Exception):
    pass


def merge_benchmarks(apps, schema_editor) -> None:
    Benchmark = apps.get_model("trajectories", "Benchmark")
    Task = apps.get_model("trajectories", "Task")
    by_name = {b.name: b for b in Benchmark.objects.all()}
    plan = merge_plan(by_name)
    clashes = []
    for canonical, spellings in plan.items():
        rows = [by_name[name] for name in spellings]
        repeated = (
            Task.objects.filter(benchmark__in=rows)
            .values("external_id")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
            .order_by("external_id")
            .values_list("external_id", flat=True)
        )
        clashes += [f"{task_id!r} ({' / '.join(spellings)} → {canonical})" for task_id in repeated]
    if clashes:
        more = len(clashes) - SHOWN_CLASHES
        shown = ", ".join(clashes[:SHOWN_CLASHES]) + (f" and {more} more" if more > 0 else "")
        raise BenchmarkMergeRefused(
            f"Cannot merge benchmark spellings: {len(clashes)} task id(s) are stored under two spellings of one "
            f"benchmark: {shown}. Merging would make them one task. Delete the task and its runs under one of the "
            "spellings (Django admin), then migrate again; importing those runs afterwards stores them under the "
            "one name. Nothing was changed."
        )
    for canonical, spellings in plan.items():
        rows = [by_name[name] for name in spellings]
        keeper = by_name.get(canonical) or min(rows, key=lambda b: b.pk)
        others = [b.pk for b in rows if b.pk != keeper.pk]
        Task.objects.filter(benchmark_id__in=others).update(benchmark_id=keeper.pk)
        Benchmark.objects.filter(pk__in=others).delete()
        if keeper.name != canonical:
            keeper.name = canonical
            keeper.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0007_import_progressed_at")]

    # Backwards: nothing to undo that can be undone (which spelling each task had is not kept).
    operations = [migrations.RunPython(merge_benchmarks, migrations.RunPython.noop)]
