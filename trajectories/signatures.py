"""Failure signatures: pure detectors over one run's agents and events (docs/signatures.md).

No ORM here. The caller builds a `Trace` (plain dataclasses) from whatever it has (stored rows,
parsed records, a test's literals) with `trace_from_rows`, and `detect(trace)` returns every
detector's *hits*: the detector, the codebook modes the hit supports (the study codebook's keys),
the events that show it (agent, event seq, file, time) and a one-line explanation.

A hit is evidence for an annotator to confirm or reject, not a label. Each rule, its thresholds
and what it misses are written down in docs/signatures.md; change both together and bump
DETECTOR_VERSION, so that stored hits say which rules found them.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

DETECTOR_VERSION = 2  # 2: spawns name workflows and several agents ("a,b")

# Thresholds (docs/signatures.md says why each is what it is).
IDLE_GAP_S = 20.0  # a stretch without own work shorter than this is thinking time, not idling
IDLE_SHARE = 0.8  # the parent idled for at least this share of the time children ran ...
IDLE_MIN_S = 30.0  # ... and children ran at least this long
POLLS_MIN = 3  # or it polled (sleep/status/wait) at least this many times while they ran
BRIEF_SHORT_CHARS = 200  # a brief shorter than this is "tiny"
BRIEFS_MIN = 3  # at least this many children with known briefs before judging them
DOMINANT_SHARE = 0.6  # one child did at least this share of all children's actions ...
DOMINANT_MIN_CHILDREN = 3  # ... among at least this many children ...
DOMINANT_MIN_ACTIONS = 10  # ... with at least this many actions in all
RETRY_REPEAT_SHARE = 0.5  # a retry redoing at least this share of the earlier attempt's actions

TEXT_CHARS = 2000  # of an event's text the detectors read: enough for a command or a brief

WRITE = "file_write"
SPAWN, JOIN, WAIT = "spawn", "join", "wait"
# Events of the parent that are not work of its own: waiting for, polling or collecting children.
NOT_WORK_KINDS = frozenset({WAIT, JOIN, SPAWN})
READ_TOOLS = frozenset({"read", "view", "cat", "open", "read_file", "readfile", "grep", "glob"})
ACTION_KINDS = frozenset({"tool_call", WRITE})
FINISHED = frozenset({"completed", "complete", "done", "finished", "submitted", "success"})
ENDED_EARLY = frozenset({"killed", "cancelled", "canceled", "stopped", "interrupted", "aborted"})

_POLL = re.compile(r"\b(sleep\s+\d|time\.sleep|wait_agent|check_status|get_status|agent_status|poll)", re.I)
_TEST = re.compile(
    r"\b(pytest|py\.test|runtests\.py|unittest|tox|nox|(npm|yarn|pnpm)\s+(run\s+)?test|"
    r"go\s+test|cargo\s+test|make\s+(test|check)|mvn\s+test|gradle\w*\s+test|jest|vitest|rspec)\b",
    re.I,
)
_ISOLATION = re.compile(r"\bgit\s+worktree\s+add\b|\bgit\s+(checkout|switch)\s+-[bcBC]\b|\bgit\s+clone\b", re.I)
_MIN = datetime.min.replace(tzinfo=UTC)
_ATTEMPT = re.compile(r"^(?P<slot>.*) · attempt (?P<k>\d+) of (?P<n>\d+)$")


# -- input ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    role: str  # main | sub
    parent: str | None = None
    label: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: str = ""
    position: int = 0
    workflow: str = ""  # the workflow (its run id) the agent ran in, if any


@dataclass(frozen=True, slots=True)
class Event:
    agent: str
    seq: int
    kind: str
    timestamp: datetime | None = None
    tool: str = ""
    text: str = ""
    files: tuple[str, ...] = ()
    target: str = ""


@dataclass(frozen=True, slots=True)
class Trace:
    """What the detectors read of a run: its agents; the events that can show a signature (writes,
    spawns, joins, waits, tool calls on files or matching a test/poll/isolation pattern, each
    agent's first brief), in time order; each agent's own work as merged stretches; its number of
    actions; its last event. Built by TraceBuilder, so that an import keeps a few small objects per
    relevant event, not the run."""

    agents: tuple[Agent, ...]
    events: tuple[Event, ...]
    work: Mapping[str, tuple[tuple[datetime, datetime], ...]] = field(default_factory=dict)
    actions: Mapping[str, int] = field(default_factory=dict)
    last: Mapping[str, Event] = field(default_factory=dict)
    n_events: int = 0

    @property
    def main(self) -> Agent | None:
        return next((a for a in self.agents if a.role == "main"), None)

    @property
    def subs(self) -> list[Agent]:
        return [a for a in self.agents if a.role == "sub"]


def kept_text(kind: str, tool: str, text: str) -> str:
    """The part of an event's text the detectors read, the same at import and on recompute: a
    tool call's matches of the test/poll/isolation patterns, a user message (a brief) up to
    TEXT_CHARS, nothing else."""
    if kind == "tool_call":
        head = text[:TEXT_CHARS]
        return " ; ".join(m.group(0) for rx in (_TEST, _POLL, _ISOLATION) if (m := rx.search(head)))
    if kind == "message" and tool == "user":
        return text[:TEXT_CHARS]
    return ""


class TraceBuilder:
    """Collects a run's events as they stream past (the importer's rows, or stored ones)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.work: dict[str, list[list[datetime]]] = defaultdict(list)
        self.actions: dict[str, int] = defaultdict(int)
        self.last: dict[str, Event] = {}
        self.briefed: set[str] = set()
        self.n = 0

    def add(self, e: Event) -> None:
        self.n += 1
        if e.kind in ACTION_KINDS:
            self.actions[e.agent] += 1
        last = self.last.get(e.agent)
        if last is None or (e.timestamp or _MIN, e.seq) >= (last.timestamp or _MIN, last.seq):
            self.last[e.agent] = e
        if e.timestamp is not None and e.kind not in NOT_WORK_KINDS and not _is_poll(e):
            stretches = self.work[e.agent]  # merged while less than IDLE_GAP_S apart
            if (
                stretches
                and stretches[-1][0] <= e.timestamp
                and (e.timestamp - stretches[-1][1]).total_seconds() < IDLE_GAP_S
            ):
                stretches[-1][1] = max(stretches[-1][1], e.timestamp)
            else:
                stretches.append([e.timestamp, e.timestamp])
        if e.kind in (WRITE, SPAWN, JOIN, WAIT) or (e.kind == "tool_call" and (e.files or e.text)):
            self.events.append(e)
        elif e.kind == "message" and e.tool == "user" and e.agent not in self.briefed:
            self.briefed.add(e.agent)
            self.events.append(e)

    def build(self, agents: Iterable[Agent]) -> Trace:
        agents = tuple(agents)
        order = {a.id: a.position for a in agents}
        rows = sorted(
            self.events, key=lambda e: (e.timestamp is None, e.timestamp or _MIN, order.get(e.agent, 0), e.seq)
        )
        work = {}
        for agent, stretches in self.work.items():
            merged: list[list[datetime]] = []
            for start, end in sorted(stretches):
                if merged and (start - merged[-1][1]).total_seconds() < IDLE_GAP_S:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            work[agent] = tuple((a, b) for a, b in merged)
        return Trace(agents, tuple(rows), work, dict(self.actions), dict(self.last), self.n)


def targets(event: Event) -> list[str]:
    """The agents (or workflow) an event names: one call may start or join several ("a,b")."""
    return [t for t in event.target.split(",") if t] if event.target else []


def trace_from_rows(agents: Iterable[Mapping], events: Iterable[Mapping]) -> Trace:
    """The one place where stored rows (or parsed records as dicts) become a Trace.

    `agents`: external_id, role, parent (external id or None), label, started_at, ended_at,
    status, position. `events`: agent (external id), seq, kind, timestamp, tool, text, files, target.
    """
    built = [
        Agent(
            id=str(a["external_id"]),
            role=str(a.get("role") or "sub"),
            parent=a.get("parent"),
            label=str(a.get("label") or ""),
            started_at=a.get("started_at"),
            ended_at=a.get("ended_at"),
            status=str(a.get("status") or ""),
            position=int(a.get("position") or 0),
            workflow=str(a.get("workflow") or ""),
        )
        for a in agents
    ]
    builder = TraceBuilder()
    for e in events:
        kind, tool = str(e.get("kind") or ""), str(e.get("tool") or "")
        builder.add(
            Event(
                agent=str(e["agent"]),
                seq=int(e["seq"]),
                kind=kind,
                timestamp=e.get("timestamp"),
                tool=tool,
                text=kept_text(kind, tool, str(e.get("text") or "")),
                files=tuple(str(f) for f in (e.get("files") or ()) if f),
                target=str(e.get("target") or ""),
            )
        )
    return builder.build(built)


def make_trace(agents: Iterable[Agent], events: Iterable[Event]) -> Trace:
    """A Trace from Agent and Event values (their texts cut as kept_text does)."""
    builder = TraceBuilder()
    for e in events:
        builder.add(replace(e, text=kept_text(e.kind, e.tool, e.text)))
    return builder.build(agents)


# -- output --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    agent: str
    seq: int | None
    file: str = ""
    time: datetime | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "seq": self.seq,
            "file": self.file,
            "time": self.time.isoformat() if self.time else None,
        }


@dataclass(frozen=True, slots=True)
class Hit:
    detector: str
    modes: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    explanation: str


@dataclass(slots=True)
class Detection:
    hits: list[Hit] = field(default_factory=list)
    reason: str = ""  # why nothing could be checked, when that is the case


def _ev(e: Event, file: str = "") -> Evidence:
    return Evidence(agent=e.agent, seq=e.seq, file=file, time=e.timestamp)


def _agent_ev(a: Agent, time: datetime | None = None) -> Evidence:
    return Evidence(agent=a.id, seq=None, time=time or a.ended_at or a.started_at)


def _some(names: list[str], shown: int = 3) -> str:
    """A few names and how many more: an explanation stays one line however many agents."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _fmt(t: datetime | None) -> str:
    return t.strftime("%H:%M:%S") if t else "?"


# -- shared views of a trace ----------------------------------------------------------------


def _norm(path: str) -> str:
    path = path.strip()
    return posixpath.normpath(path) if path else path


def _intervals(trace: Trace) -> dict[str, tuple[datetime, datetime]]:
    """Each agent's [start, end]: declared times, else its first/last timed event."""
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    for e in trace.events:
        if e.timestamp is None:
            continue
        first.setdefault(e.agent, e.timestamp)
        last[e.agent] = e.timestamp
    out = {}
    for a in trace.agents:
        start = a.started_at or first.get(a.id)
        end = a.ended_at or last.get(a.id)
        if start is not None and end is not None and end >= start:
            out[a.id] = (start, end)
    return out


def _alive(span: tuple[datetime, datetime] | None, t: datetime) -> bool:
    return span is not None and span[0] <= t <= span[1]


def _by_agent(trace: Trace) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = defaultdict(list)
    for e in trace.events:
        out[e.agent].append(e)
    return out


def _is_test(e: Event) -> bool:
    return e.kind == "tool_call" and bool(_TEST.search(e.text))


def _is_poll(e: Event) -> bool:
    return e.kind == WAIT or (e.kind == "tool_call" and bool(_POLL.search(e.text)))


def _brief(events: list[Event]) -> str | None:
    """A child's brief: its first message from the user (the parent), if it has one."""
    for e in events:
        if e.kind == "message" and e.tool == "user":
            return e.text
    return None


def _main_finish(trace: Trace, main: Agent) -> tuple[datetime, Event | None] | None:
    """When the main agent finished: its closing message (its last event is a message of its own)
    or a finished status. A log that just stops (on a join, a tool call: a cut excerpt, a crash)
    has no known finish, and the detectors that need one stay silent."""
    last = trace.last.get(main.id)
    if last is not None and last.timestamp is not None and last.kind == "message" and last.tool in ("assistant", ""):
        return max(last.timestamp, main.ended_at or last.timestamp), last
    if main.status.lower() in FINISHED and main.ended_at is not None:
        return main.ended_at, None
    return None


# -- detectors -----------------------------------------------------------------------------


def same_file_collision(trace: Trace) -> list[Hit]:
    """Agent Y writes a path that another agent X wrote earlier, while X is still alive. One hit
    per path: its first such pair as evidence, and how many agents collided on it."""
    spans = _intervals(trace)
    writes: dict[str, list[Event]] = defaultdict(list)
    for e in trace.events:
        if e.kind == WRITE and e.timestamp is not None:
            for f in {_norm(f) for f in e.files}:
                writes[f].append(e)
    hits = []
    for path, ws in writes.items():
        first_write: dict[str, Event] = {}  # agent -> its first write of this path
        pair: tuple[Event, Event] | None = None
        involved: set[str] = set()
        for later in ws:
            for agent, earlier in first_write.items():
                if agent != later.agent and _alive(spans.get(agent), later.timestamp):
                    pair = pair or (earlier, later)
                    involved.update((agent, later.agent))
            first_write.setdefault(later.agent, later)
        if pair is None:
            continue
        earlier, later = pair
        others = f"; {len(involved)} agents collided on it in all" if len(involved) > 2 else ""
        hits.append(
            Hit(
                "same_file_collision",
                ("same-file-collision", "source-overwrite", "deliverable-overwrite", "final-tree-overwrite"),
                (_ev(earlier, path), _ev(later, path)),
                f"{later.agent} wrote {path} at {_fmt(later.timestamp)} over {earlier.agent}'s write "
                f"at {_fmt(earlier.timestamp)}, while {earlier.agent} was still running{others}",
            )
        )
    return hits


def unisolated_workspace_writes(trace: Trace) -> list[Hit]:
    """Two or more agents alive at once both write files in that time, and nothing in the run shows
    that they worked in separate worktrees, branches or clones. One hit per run."""
    spans = _intervals(trace)
    by_agent = _by_agent(trace)
    writers: dict[str, list[Event]] = {}
    for agent, evs in by_agent.items():
        if agent in spans and not any(_ISOLATION.search(e.text) for e in evs):
            ws = [e for e in evs if e.kind == WRITE and e.timestamp is not None and e.files]
            if ws:
                writers[agent] = ws
    names = sorted(writers, key=lambda a: writers[a][0].timestamp)
    first: tuple[Event, Event] | None = None
    involved: set[str] = set()
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            lo, hi = max(spans[x][0], spans[y][0]), min(spans[x][1], spans[y][1])
            if lo > hi:
                continue
            wx = next((e for e in writers[x] if lo <= e.timestamp <= hi), None)
            wy = next((e for e in writers[y] if lo <= e.timestamp <= hi), None)
            if wx and wy:
                first = first or (wx, wy)
                involved.update((x, y))
    if first is None:
        return []
    wx, wy = first
    fx, fy = _norm(wx.files[0]), _norm(wy.files[0])
    return [
        Hit(
            "unisolated_workspace_writes",
            ("unisolated-workspace-writes", "cross-file-scope-collision"),
            (_ev(wx, fx), _ev(wy, fy)),
            f"{len(involved)} agents wrote files in the shared workspace while others were running "
            f"(first: {wx.agent} {fx}, {wy.agent} {fy}); no worktree, branch or clone in the run",
        )
    ]


def unfinished_children(trace: Trace) -> list[Hit]:
    """A child ended early (killed/cancelled), was still running when the main agent finished,
    or completed but its result was never collected (no join) before the main agent finished."""
    main = trace.main
    if main is None:
        return []
    spans = _intervals(trace)
    hits = []
    for child in trace.subs:
        if child.status.lower() in ENDED_EARLY:
            hits.append(
                Hit(
                    "unfinished_children",
                    ("early-child-termination",),
                    (_agent_ev(child),),
                    f"{child.id} ended with status '{child.status}' before finishing its work",
                )
            )
    finish = _main_finish(trace, main)
    if finish is None:
        return hits
    finished_at, closing = finish
    joined = {target for e in trace.events if e.kind == JOIN for target in targets(e)}
    records_joins = bool(joined)
    for child in trace.subs:
        span = spans.get(child.id)
        if span is None or child.status.lower() in ENDED_EARLY:
            continue
        closing_ev = (_ev(closing),) if closing else (Evidence(main.id, None, time=finished_at),)
        if span[1] > finished_at:
            hits.append(
                Hit(
                    "unfinished_children",
                    ("early-child-termination", "late-finalization"),
                    (*closing_ev, _agent_ev(child, span[1])),
                    f"the main agent finished at {_fmt(finished_at)} while {child.id} ran until {_fmt(span[1])}",
                )
            )
        elif records_joins and child.id not in joined:
            hits.append(
                Hit(
                    "unfinished_children",
                    ("unused-completed-result",),
                    (_agent_ev(child, span[1]), *closing_ev),
                    f"{child.id} finished at {_fmt(span[1])} but the main agent never collected its result "
                    f"before finishing at {_fmt(finished_at)}",
                )
            )
    return hits


def parent_idle_wait(trace: Trace) -> list[Hit]:
    """While children run, the main agent does no work of its own (IDLE_SHARE of that time, in
    gaps of IDLE_GAP_S or more) or keeps polling them (POLLS_MIN sleeps/status checks/waits)."""
    main = trace.main
    if main is None:
        return []
    spans = _intervals(trace)
    child_spans = sorted(spans[c.id] for c in trace.subs if c.id in spans)
    if not child_spans:
        return []
    busy: list[list[datetime]] = []  # union of the children's intervals
    for s, e in child_spans:
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    if main.id not in trace.last:  # the main agent's log is not in the bundle: its idling cannot be told
        return []
    mine = [e for e in trace.events if e.agent == main.id and e.timestamp is not None]
    work = trace.work.get(main.id, ())  # its own work, in stretches merged while < IDLE_GAP_S apart
    polls = [e for e in mine if _is_poll(e) and any(s <= e.timestamp <= t for s, t in busy)]
    total = idle = 0.0
    longest: tuple[float, datetime, datetime] | None = None
    for s, t in busy:
        total += (t - s).total_seconds()
        gaps, cursor = [], s
        for start, end in work:
            if end < s or start > t:
                continue
            gaps.append((cursor, max(start, cursor)))
            cursor = max(cursor, min(end, t))
        gaps.append((cursor, t))
        for a, b in gaps:
            gap = (b - a).total_seconds()
            if gap >= IDLE_GAP_S:
                idle += gap
                if longest is None or gap > longest[0]:
                    longest = (gap, a, b)
    hits = []
    if total >= IDLE_MIN_S and idle >= IDLE_SHARE * total and longest is not None:
        gap, a, b = longest
        evidence = [Evidence(main.id, None, time=a)]
        evidence += [_ev(e) for e in mine if e.kind in NOT_WORK_KINDS and a <= e.timestamp <= b][:4]
        hits.append(
            Hit(
                "parent_idle_wait",
                ("blind-timeout-wait", "critical-path-starvation"),
                tuple(evidence),
                f"the main agent did no work of its own for {idle:.0f} s of the {total:.0f} s its children ran "
                f"(longest stretch {gap:.0f} s, {_fmt(a)}–{_fmt(b)})",
            )
        )
    elif len(polls) >= POLLS_MIN:
        hits.append(
            Hit(
                "parent_idle_wait",
                ("blind-timeout-wait", "critical-path-starvation"),
                tuple(_ev(e) for e in polls[:5]),
                f"the main agent polled or slept {len(polls)} times while its children ran",
            )
        )
    return hits


def fanout_budget(trace: Trace) -> list[Hit]:
    """Spawns that produced no child, many children with tiny briefs, or one child doing most of
    the work."""
    # What a spawn may name: an agent, or a workflow whose agents ran.
    ids = {a.id for a in trace.agents} | {a.workflow for a in trace.agents if a.workflow}
    by_agent = _by_agent(trace)
    hits = []
    refused = [e for e in trace.events if e.kind == SPAWN and any(t not in ids for t in targets(e))]
    if refused:
        hits.append(
            Hit(
                "fanout_budget",
                ("fan-out-budget-exhaustion",),
                tuple(_ev(e) for e in refused[:5]),
                f"{len(refused)} spawn(s) produced no sub-agent (refused, capped or failed): "
                + _some([e.target for e in refused]),
            )
        )
    briefs = {c.id: b for c in trace.subs if (b := _brief(by_agent.get(c.id, []))) is not None}
    tiny = {c: b for c, b in briefs.items() if len(b.strip()) < BRIEF_SHORT_CHARS}
    if len(briefs) >= BRIEFS_MIN and len(tiny) * 2 > len(briefs):
        first = [next(e for e in by_agent[c] if e.kind == "message" and e.tool == "user") for c in tiny]
        hits.append(
            Hit(
                "fanout_budget",
                ("incomplete-child-brief",),
                tuple(_ev(e) for e in first[:5]),
                f"{len(tiny)} of {len(briefs)} sub-agents got a brief under {BRIEF_SHORT_CHARS} characters",
            )
        )
    actions = {c.id: trace.actions.get(c.id, 0) for c in trace.subs}
    total = sum(actions.values())
    if len(actions) >= DOMINANT_MIN_CHILDREN and total >= DOMINANT_MIN_ACTIONS:
        top = max(actions, key=lambda c: actions[c])
        if actions[top] >= DOMINANT_SHARE * total:
            child = next(c for c in trace.subs if c.id == top)
            hits.append(
                Hit(
                    "fanout_budget",
                    ("oversized-child-task",),
                    (_agent_ev(child, child.started_at),),
                    f"{top} did {actions[top]} of the {total} actions of {len(actions)} sub-agents",
                )
            )
    return hits


def serial_subagents(trace: Trace) -> list[Hit]:
    """Two or more timed sub-agents, never two running at once."""
    spans = _intervals(trace)
    timed = sorted((spans[c.id], c) for c in trace.subs if c.id in spans)
    if len(timed) < 2:
        return []
    for (a, _), (b, _) in zip(timed, timed[1:], strict=False):
        if b[0] < a[1]:
            return []
    return [
        Hit(
            "serial_subagents",
            ("serial-investigation", "preflight-gated-work"),
            tuple(_agent_ev(c, span[0]) for span, c in timed[:5]),
            f"{len(timed)} sub-agents ran one after another, never two at once",
        )
    ]


def duplicated_reads(trace: Trace) -> list[Hit]:
    """Two or more sub-agents read the same file (the parent's own reads do not count, nor a
    retried slot's attempts re-reading)."""
    # Attempts of one retried slot count as one reader: re-reading is the retry's signature.
    slot = {c.id: (m["slot"] if (m := _ATTEMPT.match(c.label)) else c.id) for c in trace.subs}
    readers: dict[str, dict[str, Event]] = defaultdict(dict)
    for e in trace.events:
        if e.agent in slot and e.kind == "tool_call" and e.tool.lower() in READ_TOOLS:
            for f in e.files:
                readers[_norm(f)].setdefault(slot[e.agent], e)
    hits = []
    for path, by in sorted(readers.items()):
        if len(by) >= 2:
            hits.append(
                Hit(
                    "duplicated_reads",
                    ("serial-investigation",),
                    tuple(_ev(e, path) for e in list(by.values())[:5]),
                    f"{len(by)} sub-agents read {path}: " + _some([e.agent for e in by.values()]),
                )
            )
    return hits


def checkpoint_free_retry(trace: Trace) -> list[Hit]:
    """A retried slot's later attempt repeats RETRY_REPEAT_SHARE of the earlier attempt's
    actions (same tool on the same files), or starts from the same brief when neither acted."""
    by_agent = _by_agent(trace)
    slots: dict[str, list[tuple[int, Agent]]] = defaultdict(list)
    for c in trace.subs:
        if m := _ATTEMPT.match(c.label):
            slots[m["slot"]].append((int(m["k"]), c))
    hits = []
    for slot, attempts in slots.items():
        attempts.sort(key=lambda p: p[0])
        for (_, before), (k, after) in zip(attempts, attempts[1:], strict=False):
            prev = {(e.tool, _norm(f)) for e in by_agent.get(before.id, []) if e.kind in ACTION_KINDS for f in e.files}
            again = [
                e
                for e in by_agent.get(after.id, [])
                if e.kind in ACTION_KINDS and any((e.tool, _norm(f)) in prev for f in e.files)
            ]
            redone = {(e.tool, _norm(f)) for e in again for f in e.files} & prev
            same_brief = not prev and _brief(by_agent.get(before.id, [])) == _brief(by_agent.get(after.id, []))
            if (prev and len(redone) >= RETRY_REPEAT_SHARE * len(prev)) or (same_brief and after.id in by_agent):
                what = f"redid {len(redone)} of its {len(prev)} actions" if prev else "started from the same brief"
                hits.append(
                    Hit(
                        "checkpoint_free_retry",
                        ("checkpoint-free-retry",),
                        (_agent_ev(before), *(_ev(e, e.files[0]) for e in again[:3]))
                        if again
                        else (_agent_ev(before), _agent_ev(after, after.started_at)),
                        f"attempt {k} of '{slot}' ({after.id}) {what} of attempt {k - 1} ({before.id})",
                    )
                )
    return hits


def verification_order(trace: Trace) -> list[Hit]:
    """The main agent finished; children had written files; it ran tests, but none after the last
    child write (merge after verification), or nobody ran tests after it at all (no verifier
    came back)."""
    main = trace.main
    if main is None:
        return []
    if _main_finish(trace, main) is None:
        return []  # the log stops before the main agent finished: a later test may be missing
    subs = {c.id for c in trace.subs}
    child_writes = [e for e in trace.events if e.agent in subs and e.kind == WRITE and e.timestamp is not None]
    if not child_writes:
        return []
    last_write = child_writes[-1]
    tests = [e for e in trace.events if _is_test(e) and e.timestamp is not None]
    parent_tests = [e for e in tests if e.agent == main.id]
    if any(e.timestamp > last_write.timestamp for e in tests):
        return []
    file = last_write.files[0] if last_write.files else ""
    if parent_tests:
        return [
            Hit(
                "verification_order",
                ("merge-after-verification",),
                (_ev(parent_tests[-1]), _ev(last_write, file)),
                f"the main agent last ran tests at {_fmt(parent_tests[-1].timestamp)}, before {last_write.agent} "
                f"wrote {file} at {_fmt(last_write.timestamp)}; no test ran after",
            )
        ]
    return [
        Hit(
            "verification_order",
            ("missing-verifier-return",),
            (_ev(last_write, file),),
            f"sub-agents wrote files (last: {last_write.agent}, {file} at {_fmt(last_write.timestamp)}) and no "
            "agent ran tests after",
        )
    ]


DETECTORS: dict[str, Callable[[Trace], list[Hit]]] = {
    "same_file_collision": same_file_collision,
    "unisolated_workspace_writes": unisolated_workspace_writes,
    "unfinished_children": unfinished_children,
    "parent_idle_wait": parent_idle_wait,
    "fanout_budget": fanout_budget,
    "serial_subagents": serial_subagents,
    "duplicated_reads": duplicated_reads,
    "checkpoint_free_retry": checkpoint_free_retry,
    "verification_order": verification_order,
}


# Every codebook mode each detector's hits can support (a hit lists those of the rule that fired:
# a subset). What signatures are measured against gold by (annotation/analysis/signatures.py).
DETECTOR_MODES: dict[str, tuple[str, ...]] = {
    "same_file_collision": ("same-file-collision", "source-overwrite", "deliverable-overwrite", "final-tree-overwrite"),
    "unisolated_workspace_writes": ("unisolated-workspace-writes", "cross-file-scope-collision"),
    "unfinished_children": ("early-child-termination", "late-finalization", "unused-completed-result"),
    "parent_idle_wait": ("blind-timeout-wait", "critical-path-starvation"),
    "fanout_budget": ("fan-out-budget-exhaustion", "incomplete-child-brief", "oversized-child-task"),
    "serial_subagents": ("serial-investigation", "preflight-gated-work"),
    "duplicated_reads": ("serial-investigation",),
    "checkpoint_free_retry": ("checkpoint-free-retry",),
    "verification_order": ("merge-after-verification", "missing-verifier-return"),
}


def detect(trace: Trace) -> Detection:
    """Every detector's hits, in DETECTORS order; with a reason when the run cannot show any."""
    if not trace.agents:
        return Detection(reason="no agents: nothing to examine")
    if trace.main is None:
        return Detection(reason="no main agent: the signatures are defined relative to it")
    if not trace.subs:
        return Detection(reason="no sub-agents: the concurrency signatures do not apply")
    if not trace.n_events:
        return Detection(reason="no events: nothing to examine")
    hits = [hit for detector in DETECTORS.values() for hit in detector(trace)]
    return Detection(hits=hits)
