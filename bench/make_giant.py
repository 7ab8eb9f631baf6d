"""Write one giant concurrent run (a hard LoopsBench Codex run, ~134 sub-agents × 1,500 events)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trajectories.generate import AGENTS, _run_lines  # noqa: E402


def main(path: str, events_per_agent: int = 1500) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = _run_lines(random.Random(3), "LoopsBench", "giant-000", "hard", AGENTS[0], "concurrent", events_per_agent)
    with out.open("wb") as handle:
        for line in lines:
            handle.write(orjson.dumps(line) + b"\n")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
