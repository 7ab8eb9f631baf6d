"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

Two sub-agent layouts are handled:
* inline sidechains (Claude Code 1.x): sub-agent (Task tool) messages sit in the parent
  file with `isSidechain: true`; each chain rooted at a `parentUuid: null` sidechain line
  is one sub-agent, matched to its Task call by the prompt text;
* separate files (2.x): `<session>/subagents/**/agent-<id>.jsonl`, one per sub-agent,
  plus workflow state `<session>/workflows/wf_*.json` that names, times and labels them.

Calls are tied to what they started: a `Task`/`Agent` call to the sub-agent whose first prompt is
the call's prompt (its result is then the parent's `join`), a `Workflow` call to the workflow whose
run id, task id or name its input or result names. A workflow journal
(`subagents/workflows/<wf>/journal.jsonl`) that starts the same `key` under a new `agentId` is a
retry: each attempt stays a sub-agent of its own, labelled "attempt k of n" of its slot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

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
    FormatError,
    Parser,
    ParseWarning,
    Record,
    RunSource,
    header_from_defaults,
)

SPAWN_TOOLS = {"Task", "Agent", "Workflow", "RunWorkflow"}
AGENT_TOOLS = {"Task", "Agent"}  # start one sub-agent with a prompt
WORKFLOW_TOOLS = {"Workflow", "RunWorkflow"}  # start a workflow of sub-agents
WRITE_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
SHELL_TOOLS = {"Bash", "BashOutput"}
SKIP_TYPES = {"summary", "file-history-snapshot", "queue-operation"}
MAIN_ID = "main"


def looks_like(first_line: Any) -> bool:
    """The first line past leading metadata (common.first_json_line): a message of a session."""
    return (
        isinstance(first_line, dict)
        and "sessionId" in first_line
        and ("isSidechain" in first_line or first_line.get("type") in ("user", "assistant", "system", *SKIP_TYPES))
    )


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
    format_name = "claude_code"

    def parse(self, source: RunSource) -> Iterator[Record]:
        first = source.files[0]
        has_main = not first.name.startswith(("agent-", "wf_", "journal"))
        main_file = first if has_main else None
        extra = source.files[1:] if has_main else source.files
        header = header_from_defaults(source, fallback_task=first.stem.split("__")[0], agent="Claude Code")
        yield header
        totals = _Totals()
        warnings: list[ParseWarning] = []
        yield ContextRecord(
            id=MAIN_ID,
            role=MAIN,
            label="main agent" if has_main else "main agent (transcript not in bundle)",
            file=source.relative(main_file) if main_file is not None else "",
        )
        agent_files = sorted(p for p in extra if p.name.startswith("agent-") and ".jsonl" in p.name)
        workflow_files = sorted(p for p in extra if p.name.startswith("wf_") and p.name.endswith(".json"))
        journals = sorted(p for p in extra if p.name.startswith("journal") and ".jsonl" in p.name)
        attempts = _journal_attempts(journals, source, warnings)
        workflow_agents: dict[str, ContextRecord] = {}
        links = _Links()
        for wf in workflow_files:
            for ctx in _workflow_contexts(wf, source.display(wf), links.workflows):
                if ctx.id in attempts:
                    number, total, _key = attempts[ctx.id]
                    if total > 1:
                        ctx.label = f"{ctx.label} · attempt {number} of {total}"
                workflow_agents[ctx.id] = ctx
        for path in agent_files:
            agent_id = _agent_id(path)
            if agent_id not in workflow_agents:
                prompt = _first_prompt(path)
                if prompt:
                    links.prompts.setdefault(prompt, agent_id)
        if main_file is not None:
            yield from self._main_file(
                main_file, source.name, totals, warnings, file=source.relative(main_file), links=links
            )
        emitted: set[str] = set()
        for path in agent_files:
            agent_id = _agent_id(path)
            base = workflow_agents.get(agent_id) or ContextRecord(
                id=agent_id, role=SUB, parent=MAIN_ID, label=links.labels.get(agent_id) or f"sub-agent {agent_id}"
            )
            base.parent = links.parents.get(agent_id, base.parent)
            base.file = source.relative(path)
            yield base
            emitted.add(agent_id)
            yield from self._agent_file(path, source.display(path), agent_id, totals, warnings, links=links)
        for agent_id, ctx in workflow_agents.items():
            if agent_id not in emitted:
                # The workflow state names a sub-agent whose transcript is not in the bundle.
                warnings.append(
                    ParseWarning(
                        f"sub-agent {agent_id} has no transcript file; times from workflow state", file=source.name
                    )
                )
                ctx.parent = links.parents.get(agent_id, ctx.parent)
                yield ctx
        for agent_id, parent in links.parents.items():
            if agent_id in emitted:  # a call found in a later file: only the parent is new
                yield ContextRecord(id=agent_id, role=SUB, parent=parent)
        yield from warnings
        yield DerivedOutcomes(shell_calls=totals.shell_calls, tokens=totals.tokens or None)

    # -- the session file ---------------------------------------------------------------
    def _main_file(
        self, path: Path, name: str, totals: _Totals, warnings: list, *, file: str, links: _Links
    ) -> Iterator[Record]:
        seq: dict[str, int] = {}
        chain_owner: dict[str, str] = {}  # uuid -> context id (sidechains only)
        task_prompts: dict[str, tuple[str, str]] = {}  # prompt text -> (tool_use id, description)
        task_calls: dict[str, str] = {}  # tool_use id -> context id, once known
        sidechains = 0
        for lineno, obj in iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=warnings):
            if not isinstance(obj, dict) or obj.get("type") in SKIP_TYPES:
                continue
            ts = _ts(obj, name, lineno)
            if obj.get("isSidechain"):
                parent_uuid = obj.get("parentUuid")
                ctx_id = chain_owner.get(parent_uuid) if parent_uuid else None
                if ctx_id is None:
                    sidechains += 1
                    prompt = _message_text(obj)
                    match = task_prompts.pop(prompt, None)
                    if match:
                        tool_use_id, description = match
                        ctx_id = f"task-{tool_use_id}"
                        task_calls[tool_use_id] = ctx_id
                        label = description or _first_line(prompt)
                    else:
                        ctx_id = f"sidechain-{sidechains}"
                        label = _first_line(prompt) or ctx_id
                    yield ContextRecord(id=ctx_id, role=SUB, parent=MAIN_ID, label=label, line=lineno, file=file)
                if obj.get("uuid"):
                    chain_owner[obj["uuid"]] = ctx_id
            else:
                ctx_id = MAIN_ID
            for event in _events_of(obj, ctx_id, ts, lineno, seq, totals):
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
        self, path: Path, name: str, ctx_id: str, totals: _Totals, warnings: list, *, links: _Links
    ) -> Iterator[Record]:
        seq: dict[str, int] = {}
        for lineno, obj in iter_json_lines(path, display=name, tolerate_truncated_tail=True, warnings=warnings):
            if not isinstance(obj, dict) or obj.get("type") in SKIP_TYPES:
                continue
            for event in _events_of(obj, ctx_id, _ts(obj, name, lineno), lineno, seq, totals):
                if links.link(event, obj, ctx_id):
                    pass
                elif event.kind == "tool_result":
                    event.target = ""
                elif event.kind == "spawn":
                    event.target = f"task-{event.target}"
                yield event


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


def _workflow_contexts(path: Path, name: str, runs: dict[str, tuple[str, list[str]]]) -> Iterator[ContextRecord]:
    """The sub-agents a workflow state lists; `runs` learns the workflow's names (run id, task
    id, workflow name) and its agents, so that the call that launched it can be found."""
    state = load_json_file(path, display=name)
    if not isinstance(state, dict):
        raise FormatError("workflow state must be a JSON object", file=name)
    workflow = str(state.get("workflowName") or state.get("runId") or path.stem)
    agents: list[str] = []
    run_id = str(state.get("runId") or path.stem)
    for key in ("runId", "taskId", "workflowName"):
        if isinstance(state.get(key), str) and len(state[key]) >= 6:
            runs[state[key]] = (run_id, agents)
    wf_status = str(state.get("status", ""))
    wf_end = None
    if isinstance(state.get("startTime"), (int, float)) and isinstance(state.get("durationMs"), (int, float)):
        wf_end = parse_timestamp(state["startTime"] + state["durationMs"], file=name, field="durationMs")
    for index, item in enumerate(state.get("workflowProgress") or []):
        if not isinstance(item, dict) or item.get("type") != "workflow_agent" or not item.get("agentId"):
            continue
        field = f"workflowProgress[{index}]"
        started = parse_timestamp(item.get("startedAt") or item.get("queuedAt"), file=name, field=f"{field}.startedAt")
        ended = parse_timestamp(
            item.get("completedAt") or item.get("endedAt") or item.get("lastProgressAt"),
            file=name,
            field=f"{field}.lastProgressAt",
        )
        state_name = str(item.get("state", ""))
        status = state_name if state_name not in ("progress", "running", "") else (wf_status or state_name)
        if ended is None and status in ("killed", "failed", "completed"):
            ended = wf_end
        label = " / ".join(x for x in (workflow, str(item.get("phaseTitle") or ""), str(item.get("label") or "")) if x)
        agents.append(str(item["agentId"]))
        yield ContextRecord(
            id=str(item["agentId"]),
            role=SUB,
            parent=MAIN_ID,
            label=label,
            started_at=started,
            ended_at=ended,
            status=status,
        )


def _agent_id(path: Path) -> str:
    """A sub-agent file's id: the `agentId` of its lines, else from `agent-<id>.jsonl`."""
    first = first_json_line(path)
    if isinstance(first, dict) and isinstance(first.get("agentId"), str) and first["agentId"]:
        return first["agentId"]
    return path.name.removeprefix("agent-").split(".")[0].split("__")[0]


class _Links:
    """What ties a call to what it started, learned before and while the files are read."""

    def __init__(self) -> None:
        self.prompts: dict[str, str] = {}  # a sub-agent file's first prompt -> its agent id
        # a workflow's run id, task id or name -> (its run id, its agents)
        self.workflows: dict[str, tuple[str, list[str]]] = {}
        self.calls: dict[str, str] = {}  # tool_use id -> the sub-agent or workflow it started
        self.parents: dict[str, str] = {}  # sub-agent -> the context whose call started it
        self.labels: dict[str, str] = {}  # sub-agent -> the call's description

    def link(self, event: EventRecord, obj: dict, ctx_id: str) -> bool:
        """Tie a Task/Agent or Workflow call to what it started, and its result to the same:
        True when the event was linked (its kind and target are then set)."""
        if event.kind == "spawn" and event.target:
            args = _tool_input(obj, event.target)
            started = self._started(event.tool, args)
            if started is None:
                return False
            run_id, agents = self.workflows.get(started, (started, [started]))
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
            event.kind = "tool_result" if started in self.workflows else "join"
            return True
        return False

    def _started(self, tool: str, args: Any) -> str | None:
        if tool in AGENT_TOOLS and isinstance(args, dict) and isinstance(args.get("prompt"), str):
            return self.prompts.get(args["prompt"].strip())
        if tool in WORKFLOW_TOOLS:
            # Names the call's input spells out as whole words; several workflows named: no link.
            text = to_text(args)
            named = {
                self.workflows[name][0]
                for name in self.workflows
                if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
            }
            return named.pop() if len(named) == 1 else None
        return None


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


def _journal_attempts(
    journals: list[Path], source: RunSource, warnings: list[ParseWarning]
) -> dict[str, tuple[int, int, str]]:
    """agent id -> (attempt number, attempts of its slot, slot key), from the workflow journals:
    the same `key` started again under a new `agentId` is a retry of that slot."""
    slots: dict[str, list[str]] = {}
    for journal in journals:
        name = source.display(journal)
        for _, obj in iter_json_lines(journal, display=name, tolerate_truncated_tail=True, warnings=warnings):
            if isinstance(obj, dict) and obj.get("type") == "started" and obj.get("key") and obj.get("agentId"):
                agents = slots.setdefault(f"{journal.parent.name}:{obj['key']}", [])
                if obj["agentId"] not in agents:
                    agents.append(str(obj["agentId"]))
    attempts = {}
    for key, agents in slots.items():
        for number, agent in enumerate(agents, start=1):
            attempts[agent] = (number, len(agents), key)
        if len(agents) > 1:
            warnings.append(
                ParseWarning(
                    f"workflow {key.split(':')[0]}: a slot was retried: {len(agents)} attempts "
                    f"({', '.join(agents)}), each kept as a sub-agent",
                    file=source.name,
                )
            )
    return attempts
