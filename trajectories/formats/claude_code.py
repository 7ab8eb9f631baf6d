"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

Two sub-agent layouts are handled:
* inline sidechains (Claude Code 1.x): sub-agent (Task tool) messages sit in the parent
  file with `isSidechain: true`; each chain rooted at a `parentUuid: null` sidechain line
  is one sub-agent, matched to its Task call by the prompt text;
* separate files (2.x): `<session>/subagents/**/agent-<id>.jsonl`, one per sub-agent; a
  workflow's agents are read with its state and journal (claude_workflows.py): every attempt of
  every slot is a sub-agent of its own ("probe:tests · attempt 2 of 3"), in slot order.

Every agent is timed by its own transcript: from the first to the last time any of its lines was
written (a workflow's last progress of an agent may end it later). Calls are tied to what they
started: a `Task`/`Agent` call to the sub-agent whose first prompt is the call's prompt (its result
is then the parent's `join`), a main agent's `Workflow` call to the workflow whose run id or task id its
result names, else whose name its input names (the call's target is the workflow's run id, which its
agents carry).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .claude_workflows import plan_workflows
from .common import (
    clip_text,
    files_from_args,
    first_json_line,
    iter_json_lines,
    load_json_file,
    open_binary,
    parse_timestamp,
    read_line,
    to_text,
)
from .records import (
    MAIN,
    SUB,
    ContextRecord,
    DerivedOutcomes,
    EventRecord,
    Format,
    FormatError,
    Parser,
    ParseWarning,
    Record,
    RunSource,
    display_name,
    header_from_defaults,
)

SPAWN_TOOLS = {"Task", "Agent", "Workflow", "RunWorkflow"}
AGENT_TOOLS = {"Task", "Agent"}  # start one sub-agent with a prompt
WORKFLOW_TOOLS = {"Workflow", "RunWorkflow"}  # start a workflow of sub-agents
WRITE_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
SHELL_TOOLS = {"Bash", "BashOutput"}
SKIP_TYPES = {"summary", "file-history-snapshot", "queue-operation"}
MAIN_ID = "main"
# A session's files beside its transcript, by the start of their names: a sub-agent's transcript
# (`agent-<id>.jsonl`), a workflow's state (`wf_<id>.json`) and its journal (`journal.jsonl`).
AGENT, WORKFLOW, JOURNAL = "agent-", "wf_", "journal"
SIDE_FILES = (AGENT, WORKFLOW, JOURNAL)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def looks_like(first_line: Any) -> bool:
    """The first line past leading metadata (common.first_json_line): a message of a session, or a
    workflow journal's `started` line (which agent a slot started)."""
    if not isinstance(first_line, dict):
        return False
    if first_line.get("type") == "started" and "agentId" in first_line:
        return True
    return "sessionId" in first_line and (
        "isSidechain" in first_line or first_line.get("type") in ("user", "assistant", "system", *SKIP_TYPES)
    )


def is_workflow_state(path: Path) -> bool:
    return path.name.startswith(WORKFLOW) and path.name.endswith(".json")


def group(files: list[Path], root: Path | None) -> tuple[list[RunSource], list[FormatError]]:
    """A run per session: its transcript first, then its sub-agents' transcripts and its workflows'
    states and journals. A file beside no transcript of its session joins the folder's one session
    unless a session folder above it names another; a session whose transcript is missing is read
    under an empty main agent, and says so."""
    firsts = {file: first_json_line(file) if file.suffix != ".json" else None for file in files}
    sessions: dict[str, list[Path]] = {}
    side_files = []
    for file in files:
        first = firsts[file]
        if file.name.startswith(SIDE_FILES) or (isinstance(first, dict) and first.get("agentId")):
            side_files.append(file)
        else:
            sessions.setdefault(session_id(file, first), []).insert(0, file)
    for file in side_files:
        session = session_id(file, firsts[file])
        if session not in sessions and len(sessions) == 1 and not _UUID.match(session or ""):
            session = next(iter(sessions))
        sessions.setdefault(session, []).append(file)
    runs = []
    for session, session_files in sessions.items():
        main = next((p for p in session_files if not p.name.startswith(SIDE_FILES)), None)
        notes = []
        if main is None:
            notes.append(
                f"Claude Code session {session}: main transcript not in the bundle; "
                "sub-agent files imported under an empty main agent"
            )
            main = session_files[0]
        ordered = [main] + [p for p in session_files if p is not main]
        runs.append(RunSource(name=display_name(main, root), format=FORMAT.name, files=ordered, root=root, notes=notes))
    return runs, []


def session_id(path: Path, first: Any) -> str:
    """The session a Claude Code file belongs to: its `sessionId`, else a UUID folder above it."""
    if path.name.startswith(SIDE_FILES):
        for parent in path.parents:
            if _UUID.match(parent.name):
                return parent.name
    if is_workflow_state(path):
        try:
            state = load_json_file(path)
        except FormatError:
            state = None
        script = state.get("scriptPath") if isinstance(state, dict) else None
        for part in Path(str(script or "")).parts:
            if _UUID.match(part):
                return part
    if isinstance(first, dict) and isinstance(first.get("sessionId"), str):
        return first["sessionId"]
    return path.stem


class _Totals:
    def __init__(self) -> None:
        self.shell_calls = 0
        self.tokens = 0
        self.seen_messages: set[str] = set()

    def count_usage(self, message: dict) -> None:
        msg_id = message.get("id")
        usage = message.get("usage")
        if not isinstance(usage, dict) or (msg_id and msg_id in self.seen_messages):
            return
        if msg_id:
            self.seen_messages.add(msg_id)
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                self.tokens += value


class ClaudeCodeParser(Parser):
    def parse(self, source: RunSource) -> Iterator[Record]:
        first = source.files[0]
        has_main = not first.name.startswith(SIDE_FILES)
        main_files = source.files[: max(source.sessions, 1)] if has_main else []
        main_file = main_files[0] if main_files else None
        extra = source.files[len(main_files) :]
        header = header_from_defaults(source, fallback_task=first.stem.split("__")[0], agent="Claude Code")
        yield header
        totals = _Totals()
        warnings: list[ParseWarning] = []
        rounds = f" ({len(main_files)} rounds, a session each)" if len(main_files) > 1 else ""
        yield ContextRecord(
            id=MAIN_ID,
            role=MAIN,
            label=f"main agent{rounds}" if has_main else "main agent (transcript not in bundle)",
            file=source.relative(main_file) if main_file is not None else "",
        )
        agent_files = sorted(p for p in extra if p.name.startswith(AGENT) and ".jsonl" in p.name)
        workflow_files = sorted(p for p in extra if is_workflow_state(p))
        journals = sorted(p for p in extra if p.name.startswith(JOURNAL) and ".jsonl" in p.name)
        agent_paths = {_agent_id(path): path for path in agent_files}
        links = _Links()
        # A workflow's agents first, slot by slot and attempt by attempt: the timeline's order.
        workflow_agents: dict[str, ContextRecord] = {}
        state_ends: dict[str, datetime | None] = {}  # the workflow state's last progress of an agent
        for workflow in plan_workflows(workflow_files, journals, source, warnings):
            links.add_workflow(workflow.run_id, workflow.identifiers, workflow.name, workflow.agent_ids)
            for slot in workflow.slots:
                for attempt in slot.attempts:
                    ctx = ContextRecord(
                        id=attempt.agent_id,
                        role=SUB,
                        parent=MAIN_ID,
                        label=workflow.label(slot, attempt),
                        status=attempt.status,
                        workflow=workflow.run_id,
                        slot=slot.name,
                        attempt=attempt.number,
                        attempts=slot.total,
                    )
                    path = agent_paths.get(attempt.agent_id)
                    if path is not None:
                        ctx.file = source.relative(path)
                        state_ends[attempt.agent_id] = attempt.ended_at  # timed by its transcript, below
                    else:
                        ctx.started_at, ctx.ended_at = attempt.started_at, attempt.ended_at
                        warnings.append(
                            ParseWarning(
                                f"workflow agent {attempt.agent_id} ({ctx.label}) has no transcript in the bundle"
                                + ("; timed by the workflow state" if ctx.started_at or ctx.ended_at else "; untimed"),
                                file=source.name,
                            )
                        )
                    workflow_agents[attempt.agent_id] = ctx
                    yield ctx
        for agent_id, path in agent_paths.items():
            if agent_id not in workflow_agents:
                prompt = _first_prompt(path)
                if prompt:
                    links.prompts.setdefault(prompt, agent_id)
        if links.agents:  # its Workflow calls' results say which run each started
            for path in main_files:
                links.learn_results(path, source.display(path), warnings)
        # The main agent's transcripts one after another (several: an outer loop's rounds); a later one's events
        # name the file their lines are in.
        main_state = _MainState()
        for n, path in enumerate(main_files):
            yield from self._main_file(
                path,
                source.display(path) if n else source.name,
                totals,
                warnings,
                file=source.relative(path),
                links=links,
                state=main_state,
                own_file=n > 0,
            )
        clock = main_state.clock
        if clock.first is not None:
            yield ContextRecord(id=MAIN_ID, role=MAIN, started_at=clock.first, ended_at=clock.last)
        for agent_id, path in agent_paths.items():
            if agent_id not in workflow_agents:
                in_workflow = path.parent.name if path.parent.parent.name == "workflows" else ""
                label = links.labels.get(agent_id) or (
                    f"workflow {in_workflow}: agent {agent_id} (its slot is not recorded)"
                    if in_workflow
                    else f"sub-agent {agent_id}"
                )
                yield ContextRecord(
                    id=agent_id,
                    role=SUB,
                    parent=links.parents.get(agent_id, MAIN_ID),
                    label=label,
                    file=source.relative(path),
                    workflow=in_workflow,
                )
            yield from self._agent_file(
                path, source.display(path), agent_id, totals, warnings, links=links, state_end=state_ends.get(agent_id)
            )
        for agent_id, parent in links.parents.items():
            if agent_id in agent_paths or agent_id in workflow_agents:  # the call that started it: its parent
                yield ContextRecord(id=agent_id, role=SUB, parent=parent)
        yield from warnings
        yield DerivedOutcomes(shell_calls=totals.shell_calls, tokens=totals.tokens or None)

    # -- the session file ---------------------------------------------------------------
    def _main_file(
        self,
        path: Path,
        name: str,
        totals: _Totals,
        warnings: list,
        *,
        file: str,
        links: _Links,
        state: _MainState,
        own_file: bool = False,
    ) -> Iterator[Record]:
        """One transcript of the main agent: its events (numbered on from `state`, which also times the main
        agent over every transcript); with `own_file`, each main-agent event names `file` as its line's."""
        seq = state.seq
        chain_owner: dict[str, str] = {}  # uuid -> context id (sidechains only)
        task_prompts: dict[str, tuple[str, str]] = {}  # prompt text -> (tool_use id, description)
        task_calls: dict[str, str] = {}  # tool_use id -> context id, once known
        clock = state.clock  # the main agent's own lines (queued prompts too), not its inline sub-agents'
        for lineno, obj in iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=warnings):
            if not isinstance(obj, dict):
                continue
            ts = _ts(obj, name, lineno)
            if not obj.get("isSidechain"):
                clock.saw(ts)
            if obj.get("type") in SKIP_TYPES:
                continue
            if obj.get("isSidechain"):
                parent_uuid = obj.get("parentUuid")
                ctx_id = chain_owner.get(parent_uuid) if parent_uuid else None
                if ctx_id is None:
                    state.sidechains += 1
                    prompt = _message_text(obj)
                    match = task_prompts.pop(prompt, None)
                    if match:
                        tool_use_id, description = match
                        ctx_id = f"task-{tool_use_id}"
                        task_calls[tool_use_id] = ctx_id
                        label = description or _first_line(prompt)
                    else:
                        ctx_id = f"sidechain-{state.sidechains}"
                        label = _first_line(prompt) or ctx_id
                    yield ContextRecord(id=ctx_id, role=SUB, parent=MAIN_ID, label=label, line=lineno, file=file)
                if obj.get("uuid"):
                    chain_owner[obj["uuid"]] = ctx_id
            else:
                ctx_id = MAIN_ID
            for event in _events_of(obj, ctx_id, ts, lineno, seq, totals):
                if own_file and ctx_id == MAIN_ID:
                    event.file = file
                if links.link(event, obj, ctx_id):
                    pass  # a call tied to a sub-agent file or a workflow, or its result
                elif event.kind == "spawn" and event.target:
                    args = _tool_input(obj, event.target)
                    if isinstance(args, dict) and isinstance(args.get("prompt"), str):
                        task_prompts[args["prompt"]] = (event.target, str(args.get("description", "")))
                    event.target = f"task-{event.target}"
                elif event.kind == "tool_result" and event.target in task_calls:
                    event.kind = "join"
                    event.target = task_calls[event.target]
                elif event.kind == "tool_result":
                    event.target = ""
                yield event

    def _agent_file(
        self,
        path: Path,
        name: str,
        ctx_id: str,
        totals: _Totals,
        warnings: list,
        *,
        links: _Links,
        state_end: datetime | None = None,
    ) -> Iterator[Record]:
        """A sub-agent's transcript: its events, then its times by its own clock — the first and
        last time any of its lines was written (a stalled agent writes no event while it waits);
        `state_end`, a workflow's last progress of the agent, ends it later if later."""
        seq: dict[str, int] = {}
        clock = _Clock()
        for lineno, obj in iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=warnings):
            if not isinstance(obj, dict):
                continue
            ts = _ts(obj, name, lineno)
            clock.saw(ts)
            if obj.get("type") in SKIP_TYPES:
                continue
            for event in _events_of(obj, ctx_id, ts, lineno, seq, totals):
                if links.link(event, obj, ctx_id):
                    pass
                elif event.kind == "tool_result":
                    event.target = ""
                elif event.kind == "spawn":
                    event.target = f"task-{event.target}"
                yield event
        if clock.first is not None:
            end = max(clock.last, state_end) if state_end is not None else clock.last
            yield ContextRecord(id=ctx_id, role=SUB, started_at=clock.first, ended_at=end)


class _MainState:
    """What the main agent's transcripts share when there are several (an outer loop's rounds): its events'
    numbering, its clock, and the count of inline sub-agents (their ids stay distinct)."""

    def __init__(self) -> None:
        self.seq: dict[str, int] = {}
        self.clock = _Clock()
        self.sidechains = 0


class _Clock:
    """The first and last time seen in a transcript."""

    def __init__(self) -> None:
        self.first: datetime | None = None
        self.last: datetime | None = None

    def saw(self, ts: datetime | None) -> None:
        if ts is None:
            return
        if self.first is None or ts < self.first:
            self.first = ts
        if self.last is None or ts > self.last:
            self.last = ts


def _events_of(
    obj: dict, ctx_id: str, ts: datetime | None, lineno: int, seq: dict[str, int], totals: _Totals
) -> Iterator[EventRecord]:
    def next_seq() -> int:
        seq[ctx_id] = seq.get(ctx_id, -1) + 1
        return seq[ctx_id]

    line_type = obj.get("type")
    message = obj.get("message")
    if line_type in ("user", "assistant") and isinstance(message, dict):
        if line_type == "assistant":
            totals.count_usage(message)
        content = message.get("content")
        role = message.get("role", line_type)
        if isinstance(content, str):
            yield EventRecord(
                context=ctx_id,
                seq=next_seq(),
                kind="message",
                timestamp=ts,
                tool=role,
                text=clip_text(content),
                line=lineno,
            )
            return
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                yield EventRecord(
                    context=ctx_id,
                    seq=next_seq(),
                    kind="message",
                    timestamp=ts,
                    tool=role,
                    text=clip_text(str(block.get("text", ""))),
                    line=lineno,
                )
            elif btype in ("thinking", "redacted_thinking"):
                yield EventRecord(
                    context=ctx_id,
                    seq=next_seq(),
                    kind="reasoning",
                    timestamp=ts,
                    text=clip_text(str(block.get("thinking", ""))),
                    line=lineno,
                )
            elif btype == "tool_use":
                name = str(block.get("name", ""))
                args = block.get("input")
                if name in SHELL_TOOLS:
                    totals.shell_calls += 1
                kind = "spawn" if name in SPAWN_TOOLS else "file_write" if name in WRITE_TOOLS else "tool_call"
                yield EventRecord(
                    context=ctx_id,
                    seq=next_seq(),
                    kind=kind,
                    timestamp=ts,
                    tool=name,
                    text=clip_text(to_text(args)),
                    files=files_from_args(args),
                    target=str(block.get("id", "")),
                    line=lineno,
                )
            elif btype == "tool_result":
                text = to_text(block.get("content"))
                if block.get("is_error"):
                    text = "[error] " + text
                yield EventRecord(
                    context=ctx_id,
                    seq=next_seq(),
                    kind="tool_result",
                    timestamp=ts,
                    text=clip_text(text),
                    target=str(block.get("tool_use_id", "")),
                    line=lineno,
                )
    elif line_type == "system":
        yield EventRecord(
            context=ctx_id,
            seq=next_seq(),
            kind="other",
            timestamp=ts,
            tool="system",
            text=clip_text(str(obj.get("content", ""))),
            line=lineno,
        )


def _tool_input(obj: dict, tool_use_id: str) -> Any:
    content = (obj.get("message") or {}).get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("id") == tool_use_id:
                return block.get("input")
    return None


def _message_text(obj: dict) -> str:
    message = obj.get("message")
    if not isinstance(message, dict):
        return ""
    return to_text(message.get("content"))


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]


def _ts(obj: dict, name: str, lineno: int) -> datetime | None:
    return parse_timestamp(obj.get("timestamp"), file=name, line=lineno)


def _agent_id(path: Path) -> str:
    """A sub-agent file's id: the `agentId` of its lines, else from `agent-<id>.jsonl`."""
    first = first_json_line(path)
    if isinstance(first, dict) and isinstance(first.get("agentId"), str) and first["agentId"]:
        return first["agentId"]
    return path.name.removeprefix(AGENT).split(".")[0].split("__")[0]


class _Links:
    """What ties a call to what it started, learned before and while the files are read."""

    def __init__(self) -> None:
        self.prompts: dict[str, str] = {}  # a sub-agent file's first prompt -> its agent id
        self.agents: dict[str, list[str]] = {}  # a workflow's run id -> its agents
        self.named: dict[str, set[str]] = {}  # a workflow's run id, task id or name -> the run ids it names
        self.identifiers: set[str] = set()  # the workflows' run and task ids (a name may be shared)
        self.results: dict[str, str] = {}  # a Workflow call's tool_use id -> the run id its result names
        self.calls: dict[str, str] = {}  # tool_use id -> the sub-agent or workflow it started
        self.parents: dict[str, str] = {}  # sub-agent -> the context whose call started it
        self.labels: dict[str, str] = {}  # sub-agent -> the call's description

    def add_workflow(self, run_id: str, identifiers: list[str], name: str, agents: list[str]) -> None:
        self.agents[run_id] = agents
        self.identifiers.update(identifiers)
        for word in (*identifiers, name):
            if len(word) >= 6:
                self.named.setdefault(word, set()).add(run_id)

    def learn_results(self, path: Path, name: str, warnings: list) -> None:
        """What each Workflow call of a transcript started, from its result ("Workflow launched in
        background. Task ID: wo875716h … workflows/wf_f6715fa9-66d"): the run id or task id it names
        tells apart two runs of one workflow, which the call's input (the script) cannot."""
        calls: set[str] = set()
        for _, obj in iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=[]):
            content = (obj.get("message") or {}).get("content") if isinstance(obj, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and block.get("name") in WORKFLOW_TOOLS:
                    calls.add(str(block.get("id", "")))
                elif block.get("type") == "tool_result" and str(block.get("tool_use_id", "")) in calls:
                    named = self._named_in(to_text(block.get("content")), identifiers_only=True)
                    if len(named) == 1:
                        self.results[str(block["tool_use_id"])] = named.pop()

    def link(self, event: EventRecord, obj: dict, ctx_id: str) -> bool:
        """Tie a Task/Agent or Workflow call to what it started, and its result to the same:
        True when the event was linked (its kind and target are then set)."""
        if event.kind == "spawn" and event.target:
            args = _tool_input(obj, event.target)
            started = self.results.get(event.target) or self._started(event.tool, args)
            if started is None:
                return False
            run_id, agents = started, self.agents.get(started, [started])
            self.calls[event.target] = run_id
            event.target = run_id
            for agent in agents:
                if agent != ctx_id:
                    self.parents.setdefault(agent, ctx_id)
            if event.tool in AGENT_TOOLS and isinstance(args, dict) and args.get("description"):
                self.labels.setdefault(started, str(args["description"])[:200])
            return True
        if event.kind == "tool_result" and event.target in self.calls:
            started = self.calls[event.target]
            event.target = started
            event.kind = "tool_result" if started in self.agents else "join"
            return True
        return False

    def _started(self, tool: str, args: Any) -> str | None:
        if tool in AGENT_TOOLS and isinstance(args, dict) and isinstance(args.get("prompt"), str):
            return self.prompts.get(args["prompt"].strip())
        if tool in WORKFLOW_TOOLS:
            # The workflow the call's input names (its script names the workflow); two named, or one
            # name two runs share, and its result has not told them apart: no link.
            named = self._named_in(to_text(args))
            return named.pop() if len(named) == 1 else None
        return None

    def _named_in(self, text: str, *, identifiers_only: bool = False) -> set[str]:
        """The run ids of the workflows whose names `text` spells out as whole words (with
        `identifiers_only`, their run or task ids only: names one workflow alone has)."""
        found: set[str] = set()
        for name, run_ids in self.named.items():
            if identifiers_only and name not in self.identifiers:
                continue
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
                found |= run_ids
        return found


def _first_prompt(path: Path) -> str:
    """The first user message of a sub-agent file: the prompt its Task/Agent call gave it (within
    its first 50 lines, each read within the line limit; "" if none)."""
    try:
        with open_binary(path) as handle:
            for number in range(1, 51):
                raw = read_line(handle, name=path.name, lineno=number)
                if not raw:
                    return ""
                try:
                    obj = json.loads(raw)
                except ValueError:
                    return ""
                if isinstance(obj, dict) and obj.get("type") == "user":
                    return _message_text(obj).strip()
    except (OSError, EOFError, FormatError):
        return ""
    return ""


def join_rounds(sources: list[RunSource]) -> RunSource:
    """The sessions of an outer loop's rounds as one run: their main transcripts in the order they began, read one
    after another as the main agent, then every sub-agent transcript, workflow state and journal beside them (a
    session whose main transcript is missing adds its sub-agents under the same main agent)."""
    mains: list[Path] = []
    others: list[Path] = []
    notes: list[str] = []
    for source in sources:
        if not source.files[0].name.startswith(SIDE_FILES):
            mains.append(source.files[0])
            others += source.files[1:]
        else:
            others += source.files
        notes += [note for note in source.notes if "main transcript not in the bundle" not in note]
    mains.sort(key=_began)
    return RunSource(
        name=sources[0].name,
        format=FORMAT.name,
        files=mains + others,
        root=sources[0].root,
        notes=notes,
        sessions=len(mains),
    )


def _began(path: Path) -> tuple:
    """When a transcript began (the first time on its first lines), to order rounds; unknown ones last."""
    try:
        for n, (_, obj) in enumerate(iter_json_lines(path, display=path.name, tolerate_truncated_tail=True)):
            if isinstance(obj, dict) and isinstance(obj.get("timestamp"), str):
                return (0, parse_timestamp(obj["timestamp"], file=path.name, field="timestamp"), path.name)
            if n >= 50:
                break
    except FormatError:
        pass  # the parser says what is wrong with it, where
    return (1, None, path.name)


FORMAT = Format(
    name="claude_code",
    description="a Claude Code session",
    parser=ClaudeCodeParser,
    looks_like=looks_like,
    claims=is_workflow_state,
    group=group,
    join_rounds=join_rounds,
)
