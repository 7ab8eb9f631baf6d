"""One name per benchmark (pure). Sources spell the study's benchmarks several ways — the corpus tree's
folders say `swebench_verified`, a Parallax JSONL header `SWE-bench Verified`, a manifest `swe-bench-verified` —
and each spelling would otherwise be a benchmark of its own, splitting filters, strata and pairs.

Every import stores the benchmark under `canonical_benchmark(name)` (trajectories/writer.py, the one place that
creates Benchmark rows); the run filters, the adjudication queue's filter and the published-record importer look
names up the same way, and migration 0008 merged the rows stored before. A spelling is matched ignoring case and
everything but letters and digits, so `SWE-Bench_Verified` is `swebench_verified` is `swe-bench-verified`. A name
not in the table is kept as written (whitespace trimmed and collapsed). To add a benchmark or a spelling, add it
here and write a data migration that calls `merge_plan` the way 0008 does (docs/format.md, "Benchmark names").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# canonical name -> other spellings seen in the study's sources (matched as `_key` says)
ALIASES: dict[str, tuple[str, ...]] = {
    "SWE-bench Verified": ("swebench_verified", "swe-bench-verified", "princeton-nlp/SWE-bench_Verified"),
    "NL2RepoBench": ("nl2repo", "NL2Repo", "nl2repo-bench"),
    "LoopsBench": ("loopsbench", "loops-bench"),
    "RepoZero": ("repozero", "repo-zero"),
    "ProgramBench": ("programbench", "program-bench"),
}


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.casefold())


_CANONICAL = {_key(alias): canonical for canonical, aliases in ALIASES.items() for alias in (canonical, *aliases)}


def canonical_benchmark(name: str) -> str:
    """The one name a benchmark is stored and filtered under."""
    cleaned = " ".join(name.split())
    return _CANONICAL.get(_key(cleaned), cleaned) if cleaned else cleaned


def merge_plan(names: Iterable[str]) -> dict[str, list[str]]:
    """Stored names grouped under the canonical name they become, for the groups that change (a
    canonical name with more than one spelling, or one spelling that is not the canonical one)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(canonical_benchmark(name), []).append(name)
    return {canonical: sorted(spellings) for canonical, spellings in groups.items() if spellings != [canonical]}
