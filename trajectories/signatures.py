"""Failure signatures: pure detectors over one run's agents and events (docs/signatures.md).

No ORM here. The caller builds a `Trace` (plain dataclasses) from whatever it has (stored rows,
parsed records, a test's literals) with `trace_from_rows`, and `detect(trace)` returns every
detector's *hits*: the detector, the codebook modes the hit supports (the study codebook's keys),
the events that show it (agent, event seq, file, time, and in words what each shows), a one-line
explanation an annotator can check against those events, and what would make the hit wrong.

A hit is evidence for an annotator to confirm or reject, not a label. Each rule, its thresholds
and what it misses are written down in docs/signatures.md; change both together and bump
DETECTOR_VERSION, so that stored hits say which rules found them.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

# 3: measured against the study's published decisions (issue 30): a blocked parent only when its wait
# timed out; a killed child only when the run went on without it; fan-out that the run's end cut off;
# retries only when they redo work, attempts read from the importer's workflow slots; duplicated reads
# only before any write; artifact leakage into the final patch; every hit says what its events show and
# what would make it wrong.
DETECTOR_VERSION = 3

# Thresholds (docs/signatures.md says why each is what it is).
IDLE_GAP_S = 20.0  # a stretch without an event shorter than this is not a wait worth naming
IDLE_MIN_S = 30.0  # a blocked wait that timed out must be at least this long
BRIEF_SHORT_CHARS = 200  # a brief shorter than this is "tiny"
BRIEFS_MIN = 3  # at least this many children with known briefs before judging them
DOMINANT_SHARE = 0.6  # one child did at least this share of all children's actions ...
DOMINANT_MIN_CHILDREN = 3  # ... among at least this many children ...
DOMINANT_MIN_ACTIONS = 10  # ... with at least this many actions in all
FANOUT_STARTED_MIN = 3  # a run that started at least this many sub-agents (attempts count) ...
FANOUT_CUT_MIN = 2  # ... and was cut off with at least this many still running or killed at its end
END_SLACK_S = 5.0  # "at the end of the run": within this many seconds of its last moment
RETRY_REPEAT_SHARE = 0.5  # a retry redoing at least this share of the earlier attempts' work

TEXT_CHARS = 2000  # of an event's text the detectors read: enough for a command or a brief
COMMAND_CHARS = 100_000  # of a tool call's text read for shell writes, scripts run and paths named
MENTIONS_MAX = 40  # paths named by one tool call that are kept

WRITE = "file_write"
SPAWN, JOIN, WAIT = "spawn", "join", "wait"
# Events of the parent that are not work of its own: waiting for, polling or collecting children.
NOT_WORK_KINDS = frozenset({WAIT, JOIN, SPAWN})
READ_TOOLS = frozenset({"read", "view", "cat", "open", "read_file", "readfile", "grep", "glob"})
ACTION_KINDS = frozenset({"tool_call", WRITE})
RESULT_KINDS = frozenset({"tool_result", WAIT})  # a wait's own result (a join carries the child's words)
FINISHED = frozenset({"completed", "complete", "done", "finished", "submitted", "success"})
ENDED_EARLY = frozenset(
    {"killed", "cancelled", "canceled", "stopped", "interrupted", "aborted", "timed out", "timed_out", "timeout"}
)

# A sub-agent still going when its log ends: what the importers write for one (Kimi: "unfinished in log").
STILL_RUNNING = frozenset(
    {"running", "in progress", "in_progress", "started", "pending", "unfinished", "unfinished in log"}
)

_POLL = re.compile(r"\b(sleep\s+\d|time\.sleep|wait_agent|check_status|get_status|agent_status|poll)", re.I)
_TEST = re.compile(
    r"\b(pytest|py\.test|runtests\.py|unittest|tox|nox|(npm|yarn|pnpm)\s+(run\s+)?test|"
    r"go\s+test|cargo\s+test|make\s+(test|check)|mvn\s+test|gradle\w*\s+test|jest|vitest|rspec)\b",
    re.I,
)
_ISOLATION = re.compile(r"\bgit\s+worktree\s+add\b|\bgit\s+(checkout|switch)\s+-[bcBC]\b|\bgit\s+clone\b", re.I)
# A wait's result that says it ran out: Codex's `"timed_out": true`, "timed out", "deadline exceeded".
_TIMEOUT = re.compile(r"timed[ _-]?out\"?\s*[:=]\s*true|\btimed out\b|\bdeadline exceeded\b", re.I)
_MIN = datetime.min.replace(tzinfo=UTC)
_ATTEMPT = re.compile(r"^(?P<slot>.*) · attempt (?P<k>\d+) of (?P<n>\d+)$")

# Shell commands, read for the files they write and the scripts they run (artifact_leakage, retries).
_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)(\w+)\1([^\n]*)\n.*?\n[ \t]*\2[ \t]*(?=\n|$)", re.S)
_REDIRECT = re.compile(r"(?<![<>&=\-\w])(?:\d?>>?|&>>?)[ \t]*(?!&)([^\s;|&<>()'\"`\\]+)")
_TEE = re.compile(r"\btee[ \t]+(?:-\w+[ \t]+)*([^\s;|&<>()'\"`\\]+)")
_INTERPRETERS = ("python", "node", "bash", "sh ", "ruby", "perl", "php", "deno", "./")  # a cheap first look
_SCRIPT = re.compile(
    r"(?:\b(?:python[\d.]*|node|bash|sh|zsh|ruby|perl|php|ts-node|deno[ \t]+run)[ \t]+(?:-[-\w]+[ \t]+)*"
    r"|(?:^|(?<=[\s;&|(]))(?=\./))([^\s;|&<>()'\"`\\]+)",
    re.M,
)
_SCRIPT_FILE = re.compile(r".+\.(?:py|js|mjs|cjs|ts|sh|rb|pl|php)")
_TOKENS = re.compile(r"[^\s'\"`(),;:=<>|&\[\]{}\\]+")  # a command's words, for the paths it names
_EXTENSION = re.compile(r"[A-Za-z]\w{0,4}")
# What a scratch, probe or generated file is called (artifact_leakage); a word of its path.
_SCRATCH = re.compile(
    r"(?:^|[/_.-])(probe|probes|scratch|tmp|temp|debug|repro|reproduce|sandbox|playground|try|bench|timing|notes?)"
    r"(?=$|[/_.\d-])",
    re.I,
)
_GENERATED = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|\.mypy_cache|node_modules|build|dist|\.tox|htmlcov)/|\.(pyc|pyo|log|egg-info)$"
)


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
    slot: str = ""  # the workflow slot it fills (a retried slot runs under a new agent id per attempt)
    attempt: int | None = None  # which attempt of its slot it is (1-based), and how many the slot had
    attempts: int | None = None
    # A main agent read from several transcripts (an outer loop's rounds, a session each): when each later round
    # began. A child stopped when its round ended went down with the round, not left behind by the main agent.
    rounds: tuple[datetime, ...] = ()

    def retry_slot(self) -> tuple[str, int] | None:
        """The slot this agent is an attempt of, and which attempt: the importer's slot and attempt (Claude
        Code workflows), else a label "… · attempt k of n" (formats that only name it, the planted corpus)."""
        if self.slot and self.attempt is not None:
            return f"{self.workflow}/{self.slot}" if self.workflow else self.slot, self.attempt
        if m := _ATTEMPT.match(self.label):
            return m["slot"], int(m["k"])
        return None

    @property
    def slot_name(self) -> str:
        """The slot as an annotator reads it (the label's part before " · attempt")."""
        return self.slot or (m["slot"] if (m := _ATTEMPT.match(self.label)) else self.label)


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
    writes: tuple[str, ...] = ()  # files a shell command writes (`> f`, `>> f`, `tee f`)
    scripts: tuple[str, ...] = ()  # scripts a shell command runs (`python f.py`, `./f.sh`)
    mentions: tuple[str, ...] = ()  # paths a tool call names (kept per agent, not per event)


@dataclass(frozen=True, slots=True)
class PatchedFile:
    path: str  # as the patch names it (b/ side), relative to the repository
    line: int  # the line of the patch that starts it (its `diff --git` header)
    new: bool  # the patch creates it


@dataclass(frozen=True, slots=True)
class Patch:
    """The run's final patch (its cell's model.patch): the files it changes, where each starts."""

    source: str  # the run file it was read from (cell/model.patch)
    files: tuple[PatchedFile, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """A workflow's own record of how it ended (Claude Code's `workflows/<run id>.json`, one line): its status,
    whether it returned a result, how many of its agents it retried after a stall."""

    id: str
    source: str  # the run file it was read from
    status: str = ""
    result: bool = False
    retries: int = 0


WORKFLOW_STATE = re.compile(r"(?:^|/)workflows/(?P<id>[^/]+)\.json$")  # not subagents/workflows/<id>/…


def read_workflow_state(text: str, *, source: str) -> WorkflowState | None:
    """A workflow's state file as the detectors read it; None when it is not one (not a JSON object naming
    its run id)."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("runId"), str):
        return None
    logs = document.get("logs") if isinstance(document.get("logs"), list) else []
    return WorkflowState(
        id=document["runId"],
        source=source,
        status=str(document.get("status") or ""),
        result=document.get("result") not in (None, "", [], {}),
        retries=sum(1 for line in logs if isinstance(line, str) and "retrying" in line),
    )


@dataclass(frozen=True, slots=True)
class Trace:
    """What the detectors read of a run: its agents; the events that can show a signature (writes,
    spawns, joins, waits, tool calls on files or matching a test/poll/isolation pattern or writing
    files through the shell, each agent's first brief), in time order; each agent's waits (stretches
    with no event of its own that began with a spawn, wait or poll, or ended with a join); its number
    of actions; its last event; the paths it named and the scripts it ran; the run's final patch.
    Built by TraceBuilder, so that an import keeps a few small objects per relevant event, not the run."""

    agents: tuple[Agent, ...]
    events: tuple[Event, ...]
    waits: Mapping[str, tuple[tuple[Event, Event], ...]] = field(default_factory=dict)
    actions: Mapping[str, int] = field(default_factory=dict)
    last: Mapping[str, Event] = field(default_factory=dict)
    n_events: int = 0
    mentions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    scripts: Mapping[str, frozenset[str]] = field(default_factory=dict)
    patch: Patch | None = None
    workflows: Mapping[str, WorkflowState] = field(default_factory=dict)  # by workflow id

    @property
    def main(self) -> Agent | None:
        return next((a for a in self.agents if a.role == "main"), None)

    @property
    def subs(self) -> list[Agent]:
        return [a for a in self.agents if a.role == "sub"]


def kept_text(kind: str, tool: str, text: str) -> str:
    """The part of an event's text the detectors read, the same at import and on recompute: a
    tool call's matches of the test/poll/isolation patterns, a user message (a brief) up to
    TEXT_CHARS, a result's "timed out", nothing else."""
    if kind == "tool_call":
        head = text[:TEXT_CHARS]
        return " ; ".join(m.group(0) for rx in (_TEST, _POLL, _ISOLATION) if (m := rx.search(head)))
    if kind == "message" and tool == "user":
        return text[:TEXT_CHARS]
    if kind in RESULT_KINDS and (m := _TIMEOUT.search(text[:TEXT_CHARS])):
        return m.group(0)
    return ""


def shell_command(text: str) -> str:
    """A tool call's command as the shell reads it: JSON's escapes undone (the stored text is the
    call's arguments as JSON), heredoc bodies dropped (a script's own `>` is not a redirect)."""
    command = text[:COMMAND_CHARS].replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t")
    return _HEREDOC.sub(lambda m: m.group(3), command)


def shell_effects(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files a shell command writes (redirects, tee; not /dev/*) and the scripts it runs."""
    writing = ">" in text or "tee" in text
    running = any(word in text for word in _INTERPRETERS)
    if not (writing or running):  # most calls: a look costs little, the patterns more
        return (), ()
    command = shell_command(text)
    writes = []
    for rx in (_REDIRECT, _TEE) if writing else ():
        for m in rx.finditer(command):
            path = m.group(1)
            if not path.startswith("/dev/") and re.search(r"[A-Za-z]", path) and path not in writes:
                writes.append(path)
    scripts = []
    for m in _SCRIPT.finditer(command) if running else ():
        if _SCRIPT_FILE.fullmatch(m.group(1)) and m.group(1) not in scripts:
            scripts.append(m.group(1))
    return tuple(writes), tuple(scripts)


def named_paths(text: str) -> tuple[str, ...]:
    """The paths a tool call names: its words with a file extension (`probe/p1.py`, `setup.cfg`), at most
    MENTIONS_MAX. Linear in the text: its words are split once, never searched with backtracking."""
    found: dict[str, None] = {}
    for word in _TOKENS.findall(text[:COMMAND_CHARS]):
        stem, dot, extension = word.rstrip(".").rpartition(".")
        if dot and stem and stem[-1] not in "./" and _EXTENSION.fullmatch(extension):
            found[word.rstrip(".")] = None
            if len(found) >= MENTIONS_MAX:
                break
    return tuple(found)


def trace_event(
    agent: str,
    seq: int,
    kind: str,
    timestamp: datetime | None,
    tool: str,
    text: str,
    files: Iterable[str],
    target: str,
    watch: frozenset[str] = frozenset(),
) -> Event:
    """The one place an event (the importer's row, a stored row) becomes what the detectors read:
    its text cut by kept_text, and for a tool call whose text names a file of `watch` (the names of the
    files the run's final patch creates: TraceBuilder.watch) the files its command writes, the scripts
    it runs and the paths it names, of those. Other calls are not parsed: most runs pay nothing."""
    writes: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    # a write's text is the file's content, not a command
    if kind == "tool_call" and text and watch and any(name in text for name in watch):
        writes, scripts = shell_effects(text)
        writes = tuple(p for p in writes if posixpath.basename(p) in watch)
        scripts = tuple(p for p in scripts if posixpath.basename(p) in watch)
        mentions = tuple(p for p in named_paths(text) if posixpath.basename(p) in watch)
    return Event(
        agent=agent,
        seq=seq,
        kind=kind,
        timestamp=timestamp,
        tool=tool,
        text=kept_text(kind, tool, text),
        files=tuple(f for f in files if f),
        target=target,
        writes=writes,
        scripts=scripts,
        mentions=mentions,
    )


PATCH_FILE = "cell/model.patch"  # a study cell's final patch


def pick_patch(paths: Iterable[str]) -> str | None:
    """Which of a run's patch files is its final patch: the cell's model.patch, else the only one."""
    paths = sorted(paths)
    if PATCH_FILE in paths:
        return PATCH_FILE
    return paths[0] if len(paths) == 1 else None


def read_patch(lines: Iterable[str], *, source: str) -> Patch:
    """The files a unified diff changes, each with the line that starts it and whether it is new: its
    `diff --git a/… b/…` header, or for a plain diff its `--- ` line (new when that names /dev/null)."""
    git: list[list] = []
    plain: list[list] = []
    previous = ""
    for number, line in enumerate(lines, 1):
        if line.startswith("diff --git "):
            m = re.match(r"diff --git (?:\"?a/)?(.+?)\"? (?:\"?b/)?(.+?)\"?\s*$", line)
            git.append([m.group(2) if m else line[11:].strip(), number, False])
        elif line.startswith("new file mode") and git:
            git[-1][2] = True
        elif line.startswith("+++ ") and previous.startswith("--- "):
            path = line[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith("b/") else path
            plain.append([path, number - 1, previous[4:].split("\t")[0].strip() == "/dev/null"])
        previous = line
    found = git or plain
    return Patch(source, tuple(PatchedFile(path, line, new) for path, line, new in found if path != "/dev/null"))


class TraceBuilder:
    """Collects a run's events as they stream past (the importer's rows, or stored ones); `patch`: the
    run's final patch, whose new files' names the tool calls are read for (`watch`)."""

    def __init__(self, patch: Patch | None = None, workflows: Iterable[WorkflowState] = ()) -> None:
        self.patch = patch
        self.workflows = {w.id: w for w in workflows}
        self.watch = frozenset(posixpath.basename(f.path) for f in patch.files if f.new) if patch else frozenset()
        self.events: list[Event] = []
        self.waits: dict[str, list[tuple[Event, Event]]] = defaultdict(list)
        self.previous: dict[str, Event] = {}
        self.actions: dict[str, int] = defaultdict(int)
        self.last: dict[str, Event] = {}
        self.mentions: dict[str, set[str]] = defaultdict(set)
        self.scripts: dict[str, set[str]] = defaultdict(set)
        self.briefed: set[str] = set()
        self.n = 0

    def add(self, e: Event) -> None:
        self.n += 1
        if e.kind in ACTION_KINDS:
            self.actions[e.agent] += 1
        last = self.last.get(e.agent)
        if last is None or (e.timestamp or _MIN, e.seq) >= (last.timestamp or _MIN, last.seq):
            self.last[e.agent] = e
        if e.timestamp is not None:
            before = self.previous.get(e.agent)
            if (
                before is not None
                and before.timestamp is not None
                and (e.timestamp - before.timestamp).total_seconds() >= IDLE_GAP_S
                and (_waits(before) or e.kind == JOIN)
            ):
                self.waits[e.agent].append((replace(before, mentions=()), replace(e, mentions=())))
            if before is None or before.timestamp is None or e.timestamp >= before.timestamp:
                self.previous[e.agent] = e
        if e.mentions:
            self.mentions[e.agent].update(e.mentions)
        if e.scripts:
            self.scripts[e.agent].update(e.scripts)
        kept = replace(e, mentions=()) if e.mentions else e
        if (
            e.kind in (WRITE, SPAWN, JOIN, WAIT)
            or (e.kind == "tool_call" and (e.files or e.text or e.writes))
            or (e.kind == "tool_result" and e.text)
        ):
            self.events.append(kept)
        elif e.kind == "message" and e.tool == "user" and e.agent not in self.briefed:
            self.briefed.add(e.agent)
            self.events.append(kept)

    def build(self, agents: Iterable[Agent]) -> Trace:
        agents = tuple(sorted(agents, key=lambda a: a.position))  # the run's order, however they were read
        order = {a.id: a.position for a in agents}
        rows = sorted(
            self.events, key=lambda e: (e.timestamp is None, e.timestamp or _MIN, order.get(e.agent, 0), e.seq)
        )
        return Trace(
            agents,
            tuple(rows),
            {agent: tuple(waits) for agent, waits in self.waits.items()},
            dict(self.actions),
            dict(self.last),
            self.n,
            {agent: frozenset(paths) for agent, paths in self.mentions.items()},
            {agent: frozenset(paths) for agent, paths in self.scripts.items()},
            self.patch,
            self.workflows,
        )


def _waits(e: Event) -> bool:
    """An event after which the agent waits for others: a spawn, a wait, a poll."""
    return e.kind in (SPAWN, WAIT) or _is_poll(e)


def targets(event: Event) -> list[str]:
    """The agents (or workflow) an event names: one call may start or join several ("a,b")."""
    return [t for t in event.target.split(",") if t] if event.target else []


def trace_from_rows(
    agents: Iterable[Mapping],
    events: Iterable[Mapping],
    patch: Patch | None = None,
    workflows: Iterable[WorkflowState] = (),
) -> Trace:
    """The one place where stored rows (or parsed records as dicts) become a Trace.

    `agents`: external_id, role, parent (external id or None), label, started_at, ended_at,
    status, position, and for a workflow's agent workflow, slot, attempt, attempts. `events`: agent
    (external id), seq, kind, timestamp, tool, text, files, target.
    `patch`: the run's final patch (read_patch), if it has one; `workflows`: its workflows' states.
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
            slot=str(a.get("slot") or ""),
            attempt=a.get("attempt"),
            attempts=a.get("attempts"),
            rounds=tuple(a.get("rounds") or ()),
        )
        for a in agents
    ]
    builder = TraceBuilder(patch, workflows)
    for e in events:
        builder.add(
            trace_event(
                str(e["agent"]),
                int(e["seq"]),
                str(e.get("kind") or ""),
                e.get("timestamp"),
                str(e.get("tool") or ""),
                str(e.get("text") or ""),
                (str(f) for f in (e.get("files") or ())),
                str(e.get("target") or ""),
                builder.watch,
            )
        )
    return builder.build(built)


def make_trace(
    agents: Iterable[Agent],
    events: Iterable[Event],
    patch: Patch | None = None,
    workflows: Iterable[WorkflowState] = (),
) -> Trace:
    """A Trace from Agent and Event values (read as trace_event reads a row)."""
    builder = TraceBuilder(patch, workflows)
    for e in events:
        builder.add(trace_event(e.agent, e.seq, e.kind, e.timestamp, e.tool, e.text, e.files, e.target, builder.watch))
    return builder.build(agents)


# -- output --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    """One thing a hit rests on: an agent's event (agent, seq), or a line of one of the run's files
    (`source`, `line`: the final patch's header of a file), with what it shows in words (`note`)."""

    agent: str
    seq: int | None
    file: str = ""
    time: datetime | None = None
    note: str = ""
    source: str = ""
    line: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "seq": self.seq,
            "file": self.file,
            "time": self.time.isoformat() if self.time else None,
            "note": self.note,
            "source": self.source,
            "line": self.line,
        }


@dataclass(frozen=True, slots=True)
class Hit:
    detector: str
    modes: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    explanation: str
    wrong_if: str = ""  # what would make the hit wrong: what the annotator should look for


@dataclass(slots=True)
class Detection:
    hits: list[Hit] = field(default_factory=list)
    reason: str = ""  # why nothing could be checked, when that is the case


def _ev(e: Event, file: str = "", note: str = "") -> Evidence:
    return Evidence(agent=e.agent, seq=e.seq, file=file, time=e.timestamp, note=note or _describe(e))


def _agent_ev(a: Agent, time: datetime | None = None, note: str = "") -> Evidence:
    return Evidence(agent=a.id, seq=None, time=time or a.ended_at or a.started_at, note=note)


def _describe(e: Event) -> str:
    """An event in a few words: what the annotator will find on its line."""
    what = e.tool or e.kind
    names = ", ".join(e.files[:2]) or e.target
    if e.kind == SPAWN:
        return f"{what} call starting {e.target or 'a sub-agent'}"
    if e.kind == JOIN:
        return f"result of {e.target or 'a sub-agent'} received"
    if e.kind == WAIT:
        return f"{what}: waits for {e.target or 'sub-agents'}"
    if e.kind == WRITE:
        return f"{what} of {names}" if names else what
    if e.kind == "message" and e.tool == "user":
        return "its brief (first user message)"
    if e.kind == "message":
        return "its closing message"
    if e.kind == "tool_result":
        return f"tool result{': ' + e.text if e.text else ''}"
    return f"{what} on {names}" if names else (f"{what}: {e.text}" if e.text else what)


def _named(a: Agent) -> str:
    """An agent as the annotator finds it on the timeline: its id, and for a workflow's agent its slot and
    which attempt it was ("ad7a… (probe:tests, attempt 3 of 3)")."""
    if not a.slot:
        return a.id
    attempt = f", attempt {a.attempt} of {a.attempts}" if a.attempt and a.attempts and a.attempts > 1 else ""
    return f"{a.id} ({a.slot}{attempt})"


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


def _round_ended_with(trace: Trace, main: Agent, stopped: datetime) -> bool:
    """Whether the main agent's round (of an outer loop) ended when a child stopped: a later round begins after the
    stop, and the main agent did nothing the detectors see between the stop and that round."""
    later = [start for start in main.rounds if start > stopped]
    if not later:
        return False
    slack = stopped + timedelta(seconds=END_SLACK_S)
    next_round = min(later)
    return not any(
        e.agent == main.id and e.timestamp is not None and slack < e.timestamp < next_round for e in trace.events
    )


def _intervals(trace: Trace) -> dict[str, tuple[datetime, datetime]]:
    """Each agent's [start, end]: declared times, else its first/last timed event."""
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    for e in trace.events:
        if e.timestamp is None:
            continue
        first.setdefault(e.agent, e.timestamp)
        last[e.agent] = e.timestamp
    for agent, e in trace.last.items():
        if e.timestamp is not None and (agent not in last or e.timestamp > last[agent]):
            last[agent] = e.timestamp
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


def _run_end(trace: Trace, spans: Mapping[str, tuple[datetime, datetime]]) -> datetime | None:
    """The run's last moment: the latest end of any agent or timed event."""
    ends = [end for _, end in spans.values()] + [e.timestamp for e in trace.last.values() if e.timestamp]
    return max(ends) if ends else None


def _same_file(a: str, b: str) -> bool:
    """Two spellings of one file: equal after normpath, or one a whole-component suffix of the other
    (`/workspace/probe/p1.py` and the patch's `probe/p1.py`; an absolute root is not resolved)."""
    a, b = _norm(a).lstrip("/"), _norm(b).lstrip("/")
    if not a or not b:
        return False
    short, long = sorted((a, b), key=len)
    return long == short or long.endswith("/" + short)


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
                (
                    _ev(earlier, path, f"{earlier.agent}'s {earlier.tool or 'write'} of {path}"),
                    _ev(
                        later, path, f"{later.agent}'s {later.tool or 'write'} of {path}, {earlier.agent} still running"
                    ),
                ),
                f"{later.agent} wrote {path} at {_fmt(later.timestamp)} over {earlier.agent}'s write "
                f"at {_fmt(earlier.timestamp)}, while {earlier.agent} was still running{others}",
                "Wrong if the later write kept the earlier one's change (an identical or merged edit), or the two "
                "agents worked in separate checkouts the log does not show.",
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
            (
                _ev(wx, fx, f"{wx.agent}'s {wx.tool or 'write'} of {fx}, {wy.agent} running"),
                _ev(wy, fy, f"{wy.agent}'s {wy.tool or 'write'} of {fy}, {wx.agent} running"),
            ),
            f"{len(involved)} agents wrote files in the shared workspace while others were running "
            f"(first: {wx.agent} {fx}, {wy.agent} {fy}); no worktree, branch or clone in the run",
            "Wrong if each agent had its own sandbox or checkout that the log does not show (a container per "
            "agent), or the writes could not interfere (unrelated files, nothing broke).",
        )
    ]


def unfinished_children(trace: Trace) -> list[Hit]:
    """A child was stopped (killed/cancelled) while the run went on without it, was still running
    when the main agent finished, or completed but its result was never collected (no join) before
    the main agent finished."""
    main = trace.main
    if main is None:
        return []
    spans = _intervals(trace)
    main_last = trace.last.get(main.id)
    main_end = spans[main.id][1] if main.id in spans else None
    finish = _main_finish(trace, main)
    hits = []
    for child in trace.subs:
        span = spans.get(child.id)
        if child.status.lower() not in ENDED_EARLY or span is None or main_end is None:
            continue
        # A child stopped at the run's end went down with the run (its budget ran out, the harness cut
        # it): that is not the parent abandoning it. Only a stop that the main agent outlives is claimed —
        # within the same round when the harness ran the agent in rounds (the next round is a new session).
        if (main_end - span[1]).total_seconds() <= END_SLACK_S or _round_ended_with(trace, main, span[1]):
            continue
        stopped = trace.last.get(child.id)
        child_ev = (
            _ev(stopped, note=f"{child.id}'s last event: it was {child.status} here")
            if stopped is not None
            else _agent_ev(child, span[1], f"{child.id} ended {child.status}")
        )
        main_ev = (
            _ev(main_last, note=f"the main agent still at work at {_fmt(main_last.timestamp)}")
            if main_last is not None and main_last.timestamp is not None and main_last.timestamp > span[1]
            else Evidence(main.id, None, time=main_end, note=f"the main agent runs until {_fmt(main_end)}")
        )
        hits.append(
            Hit(
                "unfinished_children",
                ("early-child-termination",),
                (child_ev, main_ev),
                f"{child.id} ended with status '{child.status}' at {_fmt(span[1])}, and the main agent went on "
                f"without it until {_fmt(main_end)}",
                "Wrong if the child had already delivered what was needed, or was stopped because its work was no "
                "longer needed (another agent covered it).",
            )
        )
    if finish is None:
        return hits
    finished_at, closing = finish
    joined = {target for e in trace.events if e.kind == JOIN for target in targets(e)}
    records_joins = bool(joined)
    closing_ev = (
        (_ev(closing, note="the main agent's closing message"),)
        if closing
        else (Evidence(main.id, None, time=finished_at, note=f"the main agent finished ({main.status})"),)
    )
    for child in trace.subs:
        span = spans.get(child.id)
        if span is None or child.status.lower() in ENDED_EARLY:
            continue
        if span[1] > finished_at:
            hits.append(
                Hit(
                    "unfinished_children",
                    ("early-child-termination",),
                    (*closing_ev, _agent_ev(child, span[1], f"{child.id} still running until {_fmt(span[1])}")),
                    f"the main agent finished at {_fmt(finished_at)} while {child.id} ran until {_fmt(span[1])}",
                    "Wrong if the child's remaining work was not needed for the deliverable, or the main agent got "
                    "its result in a way the log does not show.",
                )
            )
        elif records_joins and child.id not in joined:
            hits.append(
                Hit(
                    "unfinished_children",
                    ("unused-completed-result",),
                    (_agent_ev(child, span[1], f"{child.id} finished, never joined"), *closing_ev),
                    f"{child.id} finished at {_fmt(span[1])} but the main agent never collected its result "
                    f"before finishing at {_fmt(finished_at)}",
                    "Wrong if the main agent read the result another way (a file, a shared note), or the result "
                    "held nothing it needed.",
                )
            )
    return hits


def parent_idle_wait(trace: Trace) -> list[Hit]:
    """While children run, the main agent waits on them — a stretch of at least IDLE_MIN_S with no
    event of its own that began with its spawn, wait or poll call or ended with a child's result —
    and the wait ran out: its result says it timed out, or a child it waited on was killed or timed
    out during it. Time the main agent spent on its own tool calls, commands and thinking is never a
    wait."""
    main = trace.main
    if main is None or main.id not in trace.last:  # no log of the main agent: its waiting cannot be told
        return []
    spans = _intervals(trace)
    child_spans = [(c, spans[c.id]) for c in trace.subs if c.id in spans]
    if not child_spans:
        return []
    waits: list[tuple[Event, Event | None, datetime]] = [
        (start, end, end.timestamp) for start, end in trace.waits.get(main.id, ()) if end.timestamp
    ]
    last = trace.last[main.id]
    run_end = _run_end(trace, spans)
    if _waits(last) and last.timestamp is not None and run_end is not None and run_end > last.timestamp:
        waits.append((last, None, run_end))  # its log ends waiting
    for start, end, b in waits:
        a = start.timestamp
        running = [c for c, (s, t) in child_spans if s < b and t > a]
        if a is None or not running or (b - a).total_seconds() < IDLE_MIN_S:
            continue
        killed = [c for c in running if c.status.lower() in ENDED_EARLY and a <= spans[c.id][1] <= b]
        timed_out = end is not None and bool(_TIMEOUT.search(end.text))
        if not (timed_out or killed):
            continue
        waited = (b - a).total_seconds()
        how = (
            f"its result at {_fmt(b)} says it timed out"
            if timed_out
            else f"{_some([c.id for c in killed])} ended {killed[0].status} at {_fmt(spans[killed[0].id][1])}"
        )
        evidence = [_ev(start, note=f"the main agent's {_describe(start)}, then no event of its own")]
        if end is not None:
            evidence.append(_ev(end, note=f"{_describe(end)}, {waited:.0f} s later"))
        evidence += [_agent_ev(c, spans[c.id][1], f"{c.id} ended {c.status}") for c in killed[:3]]
        return [
            Hit(
                "parent_idle_wait",
                ("blind-timeout-wait",),
                tuple(evidence),
                f"the main agent waited {waited:.0f} s on {_some([c.id for c in running])} ({_fmt(a)}–{_fmt(b)}) "
                f"with no event of its own, and the wait ran out: {how}",
                "Wrong if the main agent checked the children's progress in a way the log does not show, or had "
                "nothing else it could do and the timeout was the plan.",
            )
        ]  # one such wait is enough to show it
    return []


def fanout_budget(trace: Trace) -> list[Hit]:
    """Spawns that produced no child; a run cut off with the fan-out still running; many children
    with tiny briefs; or one child doing most of the work."""
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
                tuple(_ev(e, note=f"{_describe(e)}: no such sub-agent ever ran") for e in refused[:5]),
                f"{len(refused)} spawn(s) produced no sub-agent (refused, capped or failed): "
                + _some([e.target for e in refused]),
                "Wrong if the spawn failed for another reason than a limit (a malformed call) and nothing needed "
                "the sub-agent it asked for.",
            )
        )
    hits += _cut_fanout(trace)
    briefs = {c.id: b for c in trace.subs if (b := _brief(by_agent.get(c.id, []))) is not None}
    tiny = {c: b for c, b in briefs.items() if len(b.strip()) < BRIEF_SHORT_CHARS}
    if len(briefs) >= BRIEFS_MIN and len(tiny) * 2 > len(briefs):
        first = [next(e for e in by_agent[c] if e.kind == "message" and e.tool == "user") for c in tiny]
        hits.append(
            Hit(
                "fanout_budget",
                ("incomplete-child-brief",),
                tuple(_ev(e, note=f"{e.agent}'s brief: {len(tiny[e.agent].strip())} characters") for e in first[:5]),
                f"{len(tiny)} of {len(briefs)} sub-agents got a brief under {BRIEF_SHORT_CHARS} characters",
                "Wrong if the sub-agents needed nothing more (the task was stated elsewhere they read, such as a "
                "shared plan file), or a short brief held every requirement.",
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
                    (_agent_ev(child, child.started_at, f"{top} starts: {actions[top]} actions follow"),),
                    f"{top} did {actions[top]} of the {total} actions of {len(actions)} sub-agents",
                    "Wrong if that child's task was meant to be the large one and it finished it in time, or the "
                    "others' tasks were small by design.",
                )
            )
    return hits


def _cut_fanout(trace: Trace) -> list[Hit]:
    """The run was cut off mid-fan-out: it started FANOUT_STARTED_MIN sub-agents or more (retried
    attempts count), its main agent never finished (no closing message, no finished status), and at
    its end FANOUT_CUT_MIN of them or more were still running (a running status) or were killed with it
    (an ended-early status). A sub-agent without a status is not counted: it may have finished."""
    main = trace.main
    if main is None or main.id not in trace.last or _main_finish(trace, main) is not None:
        return []
    spans = _intervals(trace)
    run_end = _run_end(trace, spans)
    started = [c for c in trace.subs if c.id in spans]
    if run_end is None or len(started) < FANOUT_STARTED_MIN:
        return []
    cut = [
        c
        for c in started
        if (run_end - spans[c.id][1]).total_seconds() <= END_SLACK_S
        and (c.status.lower() in ENDED_EARLY or c.status.lower() in STILL_RUNNING)
    ]
    if len(cut) < FANOUT_CUT_MIN:
        return []
    retried = _superseded(started)
    workflows = sorted({c.workflow for c in started if c.workflow})
    names = set(workflows) | {c.id for c in started}
    spawns = [e for e in trace.events if e.agent == main.id and e.kind == SPAWN and set(targets(e)) & names]
    main_last = trace.last[main.id]
    evidence = [_ev(e, note=f"the main agent's {_describe(e)}") for e in spawns[:2]]
    for state in (trace.workflows[w] for w in workflows if w in trace.workflows):
        said = [f"status {state.status or 'not stated'}", "a result" if state.result else "no result"]
        if state.retries:
            said.append(f"{state.retries} agents retried after a stall")
        evidence.append(
            Evidence("", None, note=f"workflow {state.id}'s own record: {', '.join(said)}", source=state.source, line=1)
        )
    for c in cut[:3]:
        last = trace.last.get(c.id)
        note = f"{_named(c)} at the run's end: {c.status or 'no status'}"
        evidence.append(_ev(last, note=note) if last is not None else _agent_ev(c, spans[c.id][1], note))
    evidence.append(
        _ev(main_last, note=f"the main agent's last event, {_fmt(main_last.timestamp)}: no closing message")
    )
    through = f" (workflow {', '.join(workflows)})" if workflows else ""
    again = f"; {len(retried)} earlier attempts had stalled and been retried" if retried else ""
    return [
        Hit(
            "fanout_budget",
            ("fan-out-budget-exhaustion",),
            tuple(evidence),
            f"the run stopped at {_fmt(run_end)} with the main agent unfinished (its log ends at "
            f"{_fmt(main_last.timestamp)} without a closing message) while {len(cut)} of the {len(started)} "
            f"sub-agents it started{through} were still running or were killed with it{again}",
            "Wrong if the run was stopped for another reason than its time or token budget (a crash, a harness "
            "error), or the main agent's own work was complete and the sub-agents were not needed for the "
            "deliverable.",
        )
    ]


def _superseded(agents: Iterable[Agent]) -> list[Agent]:
    """The attempts that a later attempt of their slot replaced (retried slots: Agent.retry_slot)."""
    last: dict[str, int] = {}
    for a in agents:
        if found := a.retry_slot():
            last[found[0]] = max(last.get(found[0], 0), found[1])
    return [a for a in agents if (found := a.retry_slot()) and found[1] < last[found[0]]]


def serial_subagents(trace: Trace) -> list[Hit]:
    """Two or more timed sub-agents, never two running at once, and at least two of them started before the
    main agent's first write (or it wrote nothing): the work waited on a serial phase. Sub-agents started
    after the main agent began implementing (a verifier, a reviewer, a probe of its fix) are not that."""
    spans = _intervals(trace)
    timed = sorted(((spans[c.id], c) for c in trace.subs if c.id in spans), key=lambda p: (p[0], p[1].position))
    if len(timed) < 2:
        return []
    for (a, _), (b, _) in zip(timed, timed[1:], strict=False):
        if b[0] < a[1]:
            return []
    main = trace.main
    first_write = next(
        (e for e in trace.events if main and e.agent == main.id and e.kind == WRITE and e.timestamp is not None),
        None,
    )
    before = [(span, c) for span, c in timed if first_write is None or span[0] < first_write.timestamp]
    if len(before) < 2:
        return []
    evidence = [_agent_ev(c, span[0], f"{_named(c)} runs {_fmt(span[0])}–{_fmt(span[1])}") for span, c in before[:5]]
    if first_write is not None:
        file = first_write.files[0] if first_write.files else ""
        evidence.append(_ev(first_write, file, f"the main agent's first write, {file}, after them"))
        when = f"before the main agent's first write ({file} at {_fmt(first_write.timestamp)})"
    else:
        when = "and the main agent wrote no file"
    return [
        Hit(
            "serial_subagents",
            ("serial-investigation", "preflight-gated-work"),
            tuple(evidence),
            f"{len(before)} sub-agents ran one after another, never two at once, {when}",
            "Wrong if each task needed the previous one's result (the order was forced), or the harness runs one "
            "sub-agent at a time.",
        )
    ]


def duplicated_reads(trace: Trace) -> list[Hit]:
    """Two or more sub-agents read the same file before any agent wrote a file: the investigation
    was duplicated in a phase that preceded implementation (the parent's own reads do not count,
    nor a retried slot's attempts re-reading)."""
    first_write = next((e.timestamp for e in trace.events if e.kind == WRITE and e.timestamp is not None), None)
    # Attempts of one retried slot count as one reader: re-reading is the retry's signature.
    slot = {c.id: (found[0] if (found := c.retry_slot()) else c.id) for c in trace.subs}
    readers: dict[str, dict[str, Event]] = defaultdict(dict)
    for e in trace.events:
        if first_write is not None and (e.timestamp is None or e.timestamp >= first_write):
            break
        if e.agent in slot and e.kind == "tool_call" and e.tool.lower() in READ_TOOLS:
            for f in e.files:
                readers[_norm(f)].setdefault(slot[e.agent], e)
    hits = []
    written = f"before the first write at {_fmt(first_write)}" if first_write else "and nobody wrote a file"
    for path, by in sorted(readers.items()):
        if len(by) >= 2:
            hits.append(
                Hit(
                    "duplicated_reads",
                    ("serial-investigation",),
                    tuple(_ev(e, path, f"{e.agent} reads {path}") for e in list(by.values())[:5]),
                    f"{len(by)} sub-agents read {path} {written}: " + _some([e.agent for e in by.values()]),
                    "Wrong if each sub-agent needed the file for a different question, or implementation was not "
                    "waiting on this investigation.",
                )
            )
    return hits


def checkpoint_free_retry(trace: Trace) -> list[Hit]:
    """A retried slot's later attempt redoes RETRY_REPEAT_SHARE or more of the work its earlier
    attempts did — the same writes and non-read tool calls on the same files — with nothing carried
    over. Re-reading files (every fresh agent's orientation) is not work redone."""
    by_agent = _by_agent(trace)
    slots: dict[str, list[tuple[int, Agent]]] = defaultdict(list)
    for c in trace.subs:
        if found := c.retry_slot():
            slots[found[0]].append((found[1], c))
    hits = []
    for attempts in slots.values():
        attempts.sort(key=lambda p: p[0])
        done: dict[tuple[str, str], Event] = {}  # the earlier attempts' work: (tool, file) -> its event
        for k, attempt in attempts:
            work = [(e, key) for e in by_agent.get(attempt.id, []) for key in _work(e)]
            again = [(e, key) for e, key in work if key in done]
            redone = {key for _, key in again}
            if done and len(redone) >= RETRY_REPEAT_SHARE * len(done):
                listed = _some(sorted(f"{tool} {path}" for tool, path in redone))
                first = [done[key] for key in sorted(redone)[:2]]
                shown = list(dict.fromkeys(e for e, _ in again))[:3]
                hits.append(
                    Hit(
                        "checkpoint_free_retry",
                        ("checkpoint-free-retry",),
                        (
                            *(_ev(e, e.files[0] if e.files else "", f"earlier attempt: {_describe(e)}") for e in first),
                            *(
                                _ev(e, e.files[0] if e.files else "", f"attempt {k} again: {_describe(e)}")
                                for e in shown
                            ),
                        ),
                        f"attempt {k} of '{attempt.slot_name}' ({attempt.id}) redid {len(redone)} of the {len(done)} "
                        f"file actions of its earlier attempts: {listed}",
                        "Wrong if the retry was told what the earlier attempt found (its brief names it), or redoing "
                        "the work was needed (the workspace had been reset).",
                    )
                )
            for e, key in work:
                done.setdefault(key, e)
    return hits


def _first(e: Event) -> str:
    return (e.files or ("",))[0]


def _work(e: Event) -> list[tuple[str, str]]:
    """An event's work on files: a write, a non-read tool call on files."""
    if e.kind not in ACTION_KINDS:
        return []
    if e.kind == WRITE or e.tool.lower() not in READ_TOOLS:
        return [(e.tool or e.kind, _norm(f)) for f in e.files]
    return []


def verification_order(trace: Trace) -> list[Hit]:
    """The main agent finished; children had written files that the run delivers (when its final patch is
    known: files the patch changes; else any); it ran tests, but none after the last such child write
    (merge after verification), or nobody ran tests after it at all (the integrated result was never
    verified before the main agent closed: unverified global completion)."""
    main = trace.main
    if main is None:
        return []
    finish = _main_finish(trace, main)
    if finish is None:
        return []  # the log stops before the main agent finished: a later test may be missing
    subs = {c.id for c in trace.subs}
    delivered = [f.path for f in trace.patch.files] if trace.patch is not None and trace.patch.files else None
    child_writes = [
        e
        for e in trace.events
        if e.agent in subs
        and e.kind == WRITE
        and e.timestamp is not None
        and (delivered is None or any(_same_file(f, p) for f in e.files for p in delivered))
    ]
    if not child_writes:
        return []
    last_write = child_writes[-1]
    tests = [e for e in trace.events if _is_test(e) and e.timestamp is not None]
    parent_tests = [e for e in tests if e.agent == main.id]
    if any(e.timestamp > last_write.timestamp for e in tests):
        return []
    file = last_write.files[0] if last_write.files else ""
    in_patch = " (a file of the final patch)" if delivered is not None else ""
    if parent_tests:
        return [
            Hit(
                "verification_order",
                ("merge-after-verification",),
                (
                    _ev(parent_tests[-1], note=f"the main agent's last test run ({parent_tests[-1].text})"),
                    _ev(last_write, file, f"{last_write.agent}'s later write of {file}{in_patch}"),
                ),
                f"the main agent last ran tests at {_fmt(parent_tests[-1].timestamp)}, before {last_write.agent} "
                f"wrote {file}{in_patch} at {_fmt(last_write.timestamp)}; no test ran after",
                "Wrong if a test ran after the last write in a way the log does not show, or that write cannot "
                "change what the tests check.",
            )
        ]
    finished_at, closing = finish
    closed = (
        _ev(closing, note="the main agent's closing message, no test run after that write")
        if closing is not None
        else Evidence(main.id, None, time=finished_at, note=f"the main agent finished ({main.status})")
    )
    return [
        Hit(
            "verification_order",
            ("unverified-global-completion",),
            (_ev(last_write, file, f"{last_write.agent}'s last write, {file}{in_patch}; no test after"), closed),
            f"sub-agents wrote files (last: {last_write.agent}, {file}{in_patch} at "
            f"{_fmt(last_write.timestamp)}) and the main agent closed at {_fmt(finished_at)} with no agent "
            "running tests after",
            "Wrong if no verification was expected of this task, or tests ran in a way the log does not show "
            "(a harness step, a script with another name).",
        )
    ]


def artifact_leakage(trace: Trace) -> list[Hit]:
    """Files a sub-agent wrote (a write event, or a shell redirect or tee) that reach the run's
    final patch as new files, which the main agent never read, wrote or named in a command, and
    that look like artifacts rather than deliverables: an agent ran them as a script, their name
    says probe/scratch/tmp/debug/repro, or they are build output or a cache."""
    main = trace.main
    if main is None or trace.patch is None or not trace.patch.files:
        return []
    subs = {c.id for c in trace.subs}
    agents = {a.id: a for a in trace.agents}
    written: dict[str, list[tuple[Event, str]]] = defaultdict(list)  # patched file -> sub-agents' writes of it
    owned: set[str] = set()  # patched files the main agent wrote, read or named
    new_files = [f for f in trace.patch.files if f.new]
    for e in trace.events:
        paths = [*e.files] if e.kind == WRITE else []
        paths += list(e.writes)
        reads = list(e.files) if e.kind == "tool_call" else []
        for patched in new_files:
            if e.agent == main.id and any(_same_file(p, patched.path) for p in [*paths, *reads]):
                owned.add(patched.path)
            elif e.agent in subs:
                for p in paths:
                    if _same_file(p, patched.path):
                        written[patched.path].append((e, p))
    named = trace.mentions.get(main.id, frozenset())
    ran = {_norm(s) for scripts in trace.scripts.values() for s in scripts}
    leaked = []
    for patched in new_files:
        if patched.path not in written or patched.path in owned:
            continue
        if any(_same_file(n, patched.path) for n in named):
            continue
        why = []
        if any(_same_file(s, patched.path) for s in ran):
            why.append("run as a script")
        if _SCRATCH.search(patched.path):
            why.append("named as scratch")
        if _GENERATED.search(patched.path):
            why.append("build output or cache")
        if why:
            leaked.append((patched, written[patched.path][0], why))
    if not leaked:
        return []
    evidence = []
    for patched, (e, spelled), _why in leaked[:3]:
        how = "through the shell" if spelled in e.writes else f"with {e.tool or 'a write'}"
        evidence.append(_ev(e, spelled, f"{_named(agents[e.agent])} writes {spelled} {how}"))
        evidence.append(
            Evidence(
                "",
                None,
                patched.path,
                note=f"the final patch adds {patched.path}",
                source=trace.patch.source,
                line=patched.line,
            )  # fmt: skip
        )
    listed = _some(
        [f"{p.path} ({e.agent}{' in ' + agents[e.agent].slot if agents[e.agent].slot else ''}, {', '.join(why)})"
         for p, (e, _), why in leaked]
    )  # fmt: skip
    return [
        Hit(
            "artifact_leakage",
            ("artifact-leakage",),
            tuple(evidence),
            f"{len(leaked)} file(s) that sub-agents wrote reached the final patch ({trace.patch.source}) as new "
            f"files the main agent never read, wrote or named: {listed}",
            "Wrong if the file is a deliverable the task asks for (a test or module a sub-agent was told to write), "
            "or the main agent reviewed it in a way the log does not show (a `git diff` it read).",
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
    "artifact_leakage": artifact_leakage,
}


# Every codebook mode each detector's hits can support (a hit lists those of the rule that fired:
# a subset). What signatures are measured against gold by (annotation/analysis/signatures.py).
DETECTOR_MODES: dict[str, tuple[str, ...]] = {
    "same_file_collision": ("same-file-collision", "source-overwrite", "deliverable-overwrite", "final-tree-overwrite"),
    "unisolated_workspace_writes": ("unisolated-workspace-writes", "cross-file-scope-collision"),
    "unfinished_children": ("early-child-termination", "unused-completed-result"),
    "parent_idle_wait": ("blind-timeout-wait",),
    "fanout_budget": ("fan-out-budget-exhaustion", "incomplete-child-brief", "oversized-child-task"),
    "serial_subagents": ("serial-investigation", "preflight-gated-work"),
    "duplicated_reads": ("serial-investigation",),
    "checkpoint_free_retry": ("checkpoint-free-retry",),
    "verification_order": ("merge-after-verification", "unverified-global-completion"),
    "artifact_leakage": ("artifact-leakage",),
}


# A generic hit gives way to a more specific one on the same run. The study labels an episode by its most
# specific mode and rejects the generic one by name: "scratch files were not merely shared-workspace writes;
# they leaked into the submitted patch as artifacts" (django-10999, claude), "not merely unisolated writes;
# broad copy and package-tree replacement are directly evidenced" (dictdatabase, codex).
SUBSUMED_BY: dict[str, frozenset[str]] = {
    "unisolated_workspace_writes": frozenset({"same_file_collision", "artifact_leakage"}),
}


def detect(trace: Trace) -> Detection:
    """Every detector's hits, in DETECTORS order, less those a more specific hit subsumes (SUBSUMED_BY);
    with a reason when the run cannot show any."""
    if not trace.agents:
        return Detection(reason="no agents: nothing to examine")
    if trace.main is None:
        return Detection(reason="no main agent: the signatures are defined relative to it")
    if not trace.subs:
        return Detection(reason="no sub-agents: the concurrency signatures do not apply")
    if not trace.n_events:
        return Detection(reason="no events: nothing to examine")
    hits = [hit for detector in DETECTORS.values() for hit in detector(trace)]
    fired = {hit.detector for hit in hits}
    return Detection(hits=[hit for hit in hits if not SUBSUMED_BY.get(hit.detector, frozenset()) & fired])
