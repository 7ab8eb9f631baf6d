"""Claude Code workflows: which agents a workflow ran, in which slot, and which attempt each was.

A `Workflow` call runs a script that starts agents in named *slots* (`probe:tests`, `probe:redos` …),
grouped in phases. Three files record it, under the session's folder:

* `workflows/<run id>.json` — the workflow's state: its name, status, start and duration, its log
  lines (`[stall] agent "probe:tests" stalled (no progress) after 318s — retrying (1/5)`), and one
  `workflow_agent` item per slot naming the slot's **last** agent (`agentId`), its `attempt` number,
  its phase, and `startedAt` / `lastProgressAt` — the *slot's* first start and last progress, not the
  last attempt's own times;
* `subagents/workflows/<run id>/journal.jsonl` — one `started` line per agent the workflow started:
  the slot's `key` and the new `agentId`. The same key started again is a retry of that slot;
* `subagents/workflows/<run id>/agent-<id>.jsonl` — each agent's own transcript, every attempt's.

So the journal lists every attempt, the state names the slots, and the transcripts time each attempt
by its own clock. ORM-free: paths in, plain values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .common import iter_json_lines, load_json_file, parse_timestamp
from .records import FormatError, ParseWarning, RunSource

# `[stall] agent "probe:tests" stalled (no progress) after 318s — retrying (1/5)`: attempt 1 of that
# slot ended because it stalled.
_RETRY_LOG = re.compile(r'^\[(?P<why>[\w-]+)\] agent "(?P<slot>[^"]+)" .*?retrying \((?P<n>\d+)/\d+\)')
_RETRY_SUFFIX = re.compile(r"\s*\(retry \d+\)\s*$")
_REASONS = {"stall": "stalled", "error": "failed", "timeout": "timed out"}
RUNNING_STATES = ("progress", "running", "start", "started", "")


@dataclass
class Attempt:
    agent_id: str
    number: int
    status: str = ""
    started_at: datetime | None = None  # from the workflow state: used only when no transcript times it
    ended_at: datetime | None = None


@dataclass
class Slot:
    key: str  # the journal's key, or the state item's index when there is no journal
    name: str
    phase: str = ""
    order: int = 0
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Attempts the slot had: those listed, or more when the state numbers its last one higher
        (earlier attempts not in the bundle)."""
        return max([len(self.attempts), *(a.number for a in self.attempts)])


@dataclass
class Workflow:
    run_id: str
    name: str
    status: str = ""
    identifiers: list[str] = field(default_factory=list)  # run id, task id: what a call's result cites
    slots: list[Slot] = field(default_factory=list)

    @property
    def agent_ids(self) -> list[str]:
        return [attempt.agent_id for slot in self.slots for attempt in slot.attempts]

    def label(self, slot: Slot, attempt: Attempt) -> str:
        label = " / ".join(part for part in (self.name, slot.phase, slot.name) if part)
        if slot.total > 1:
            label += f" · attempt {attempt.number} of {slot.total}"
        return label


def plan_workflows(
    states: list[Path], journals: list[Path], source: RunSource, warnings: list[ParseWarning]
) -> list[Workflow]:
    """Every workflow of a session from its state files and journals (either alone is enough to
    list its agents), slots in the order the workflow lists them, attempts in the order started."""
    by_id: dict[str, Workflow] = {}
    items: dict[str, list[dict]] = {}
    reasons: dict[str, dict[tuple[str, int], str]] = {}
    for path in states:
        workflow, progress, retry_reasons = _read_state(path, source.display(path))
        by_id[workflow.run_id] = workflow
        items[workflow.run_id] = progress
        reasons[workflow.run_id] = retry_reasons
    started: dict[str, dict[str, list[str]]] = {}  # run id -> key -> agent ids, in journal order
    for path in journals:
        run_id = path.parent.name
        keys = started.setdefault(run_id, {})
        display = source.display(path)
        for _, obj in iter_json_lines(path, display=display, tolerate_truncated_tail=True, warnings=warnings):
            if isinstance(obj, dict) and obj.get("type") == "started" and obj.get("key") and obj.get("agentId"):
                agents = keys.setdefault(str(obj["key"]), [])
                if str(obj["agentId"]) not in agents:
                    agents.append(str(obj["agentId"]))
    for run_id in sorted(set(by_id) | set(started)):
        workflow = by_id.get(run_id) or Workflow(run_id=run_id, name=run_id, identifiers=[run_id])
        if run_id not in by_id:
            warnings.append(
                ParseWarning(
                    f"workflow {run_id}: its state (workflows/{run_id}.json) is not in the bundle: "
                    "its slots are unnamed and its agents timed by their transcripts only",
                    file=source.name,
                )
            )
        workflow.slots = _slots(workflow, items.get(run_id, []), started.get(run_id), reasons.get(run_id, {}))
        for slot in workflow.slots:
            if slot.total > 1:
                warnings.append(
                    ParseWarning(
                        f"workflow {run_id}: slot {slot.name!r} was retried: {slot.total} attempts "
                        f"({', '.join(a.agent_id for a in slot.attempts)}), each kept as a sub-agent timed by "
                        "its own transcript",
                        file=source.name,
                    )
                )
        by_id[run_id] = workflow
    return list(by_id.values())


def _read_state(path: Path, name: str) -> tuple[Workflow, list[dict], dict[tuple[str, int], str]]:
    state = load_json_file(path, display=name)
    if not isinstance(state, dict):
        raise FormatError("workflow state must be a JSON object", file=name)
    run_id = str(state.get("runId") or path.stem)
    workflow = Workflow(
        run_id=run_id,
        name=str(state.get("workflowName") or run_id),
        status=str(state.get("status") or ""),
        identifiers=[str(state[k]) for k in ("runId", "taskId") if isinstance(state.get(k), str)] or [run_id],
    )
    end = None
    if isinstance(state.get("startTime"), (int, float)) and isinstance(state.get("durationMs"), (int, float)):
        end = parse_timestamp(state["startTime"] + state["durationMs"], file=name, field="durationMs")
    items = state.get("workflowProgress") or []
    if not isinstance(items, list):
        raise FormatError(f"expected a list, got {type(items).__name__}", file=name, field="workflowProgress")
    progress = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "workflow_agent" or not item.get("agentId"):
            continue
        where = f"workflowProgress[{index}]"
        started = parse_timestamp(item.get("startedAt") or item.get("queuedAt"), file=name, field=f"{where}.startedAt")
        last = parse_timestamp(
            item.get("completedAt") or item.get("endedAt") or item.get("lastProgressAt"),
            file=name,
            field=f"{where}.lastProgressAt",
        )
        state_name = str(item.get("state") or "")
        status = state_name if state_name not in RUNNING_STATES else (workflow.status or state_name)
        if last is None and status in ("killed", "failed", "completed"):
            last = end
        number = item.get("attempt")
        progress.append(
            {
                "agent": str(item["agentId"]),
                "slot": _RETRY_SUFFIX.sub("", str(item.get("label") or "")) or f"slot {len(progress) + 1}",
                "phase": str(item.get("phaseTitle") or ""),
                "order": item.get("index") if isinstance(item.get("index"), int) else len(progress),
                "attempt": number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else 1,
                "status": status[:50],
                "started": started,
                "ended": last,
            }
        )
    reasons: dict[tuple[str, int], str] = {}
    logs = state.get("logs") or []
    if not isinstance(logs, list):
        raise FormatError(f"expected a list of log lines, got {type(logs).__name__}", file=name, field="logs")
    for line in logs:
        match = _RETRY_LOG.match(str(line))
        if match:
            why = match["why"].lower()
            reasons[(match["slot"], int(match["n"]))] = _REASONS.get(why, why)
    return workflow, progress, reasons


def _slots(workflow: Workflow, progress: list[dict], journal: dict[str, list[str]] | None, reasons: dict) -> list[Slot]:
    by_agent = {item["agent"]: item for item in progress}
    slots: list[Slot] = []
    if journal is None:  # no journal: one slot per state item, and only its last attempt is known
        for item in progress:
            slot = Slot(key=str(item["order"]), name=item["slot"], phase=item["phase"], order=item["order"])
            slot.attempts = [_last_attempt(item, item["attempt"])]
            slots.append(slot)
        return sorted(slots, key=lambda s: s.order)
    for position, (key, agents) in enumerate(journal.items()):
        item = next((by_agent[a] for a in reversed(agents) if a in by_agent), None)
        name = item["slot"] if item else f"slot {position + 1}"
        slot = Slot(key=key, name=name, phase=item["phase"] if item else "", order=item["order"] if item else 1000)
        for number, agent in enumerate(agents, start=1):
            if item is not None and agent == item["agent"]:
                slot.attempts.append(_last_attempt(item, number))
            else:
                why = reasons.get((name, number))
                slot.attempts.append(Attempt(agent, number, status=f"{why}, retried" if why else "retried"))
        slots.append(slot)
    for item in progress:  # a slot the state lists but the journal does not
        if not any(item["agent"] in (a.agent_id for a in slot.attempts) for slot in slots):
            slot = Slot(key=str(item["order"]), name=item["slot"], phase=item["phase"], order=item["order"])
            slot.attempts = [_last_attempt(item, item["attempt"])]
            slots.append(slot)
    return sorted(slots, key=lambda s: s.order)


def _last_attempt(item: dict, number: int) -> Attempt:
    # The state's startedAt is the slot's first start: it times the last attempt only if it is the first.
    return Attempt(
        agent_id=item["agent"],
        number=number,
        status=item["status"],
        started_at=item["started"] if number == 1 else None,
        ended_at=item["ended"],
    )
