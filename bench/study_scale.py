"""A coded study at any scale, fast, for the benchmarks: bulk inserts in the shapes the real
services write, so that every page reads what it would read after the same work done by hand.

One study = `tasks` tasks × 3 agent systems, each a concurrent run and its sequential twin; the
study holds every concurrent run, each coded by two of its three annotators, submitted and
reconciled. Step by step (one function each, called by `build_study`):

  corpus     tasks and runs with outcomes and process metrics, shaped like the paper corpus: a
             concurrent run has a main agent and 2–4 sub-agents, ~80 events in all (a sequential
             run ~60), its log stored with its text (so every anchor opens its line) and, on about
             a third of the concurrent runs, failure-signature hits citing its events;
  study      the real `study_create` and `study_assign` (three annotators and an adjudicator);
  codings    per assignment an Annotation with its Labels and the AuditEntry rows the services
             write ("save", "submit"), before/after as `snapshot()` takes them — agreement reads the
             first submit's `after`. As on a coding day: most runs coded by both annotators, some
             with a draft saved and not submitted, some not started; multi-paragraph rationales,
             two or three evidence anchors and a contrast anchor per episode;
  reviews    as `run_reconcile` and the review services: agreeing codings → an agreed FinalCoding
             (labels merged as `merged_labels` merges them); differing ones → a Discussion with a
             comment from each annotator, then consensus (the second annotator's "revise" entry),
             adjudication, still escalated and waiting for the adjudicator, or still open (no final
             yet: the discussion lists and the adjudication queue have work); each step's activity
             log entry.

Nothing here is a result: rationales say "[bench data]".
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import ADJUDICATOR, ANNOTATOR
from activity.models import ActivityEntry
from annotation.analysis.agreement import masi_distance
from annotation.models import (
    Annotation,
    Assignment,
    AuditEntry,
    Comment,
    Discussion,
    FinalCoding,
    FinalLabel,
    Label,
    Study,
)
from annotation.services.studies import study_assign, study_create
from taxonomy.models import Code, Codebook
from trajectories.artifacts import anchor_text
from trajectories.generate import AGENTS, BENCHMARKS, DIFFICULTIES
from trajectories.models import AgentContext, AgentSystem, Benchmark, Event, Run, RunFile, SignatureHit, Task
from trajectories.signatures import DETECTOR_MODES, DETECTOR_VERSION

SCALES = {"demo": 14, "paper": 354, "10x": 3540}  # tasks; runs = tasks × 3 agents × 2 modes
BATCH = 2000
AGREE = 0.76  # chance the second coder picks the first's modes: ~24% of runs discussed
OUTCOMES = (("consensus", 0.35), ("adjudicated", 0.30), ("escalated", 0.20), ("open", 0.15))  # of the discussions
CODING_DAY = (("both", 0.84), ("draft", 0.06), ("one", 0.05), ("none", 0.05))  # how far each run's coding got
LOG = "agent/trajectory.jsonl"


def build_study(*, key: str, tasks: int, codebook: Codebook) -> Study:
    rng = random.Random(f"study-scale:{key}")
    run_ids = corpus(key=key, tasks=tasks, rng=rng)
    study = study_with_annotators(key=key, run_ids=run_ids, codebook=codebook)
    plans = codings(study=study, rng=rng)
    reviews(study=study, plans=plans)
    # What the services' statistics_changed does with each submission and final label (the bulk inserts
    # bypass them): the study's inputs move on, and its stored statistics are no longer current.
    Study.objects.filter(pk=study.pk).update(statistics_version=F("statistics_version") + 1)
    return study


# -- corpus ------------------------------------------------------------------------------------


@transaction.atomic
def corpus(*, key: str, tasks: int, rng: random.Random) -> list[int]:
    """Tasks, runs, agents and events; returns the concurrent runs' ids."""
    benchmarks = [Benchmark.objects.get_or_create(name=name)[0] for name in BENCHMARKS]
    agents = [AgentSystem.objects.get_or_create(name=a.name, defaults={"backbone_model": a.model})[0] for a in AGENTS]
    task_rows = Task.objects.bulk_create(
        [
            Task(
                benchmark=benchmarks[i % len(benchmarks)],
                external_id=f"{key}-{i:05d}",
                difficulty=DIFFICULTIES[i % 3],
                prompt_sha256=_sha(f"{key}/{i}"),
            )
            for i in range(tasks)
        ],
        batch_size=BATCH,
    )
    runs = Run.objects.bulk_create(
        [_run(rng, task, agent, mode) for task in task_rows for agent in agents for mode in Run.Mode.values],
        batch_size=BATCH,
    )
    mains = AgentContext.objects.bulk_create([_context(run, "main", None) for run in runs], batch_size=BATCH)
    subs = AgentContext.objects.bulk_create(
        [
            _context(run, f"sub-{k}", main)
            for run, main in zip(runs, mains, strict=True)
            if run.mode == Run.Mode.CONCURRENT
            for k in range(run.subagents_created)
        ],
        batch_size=BATCH,
    )
    by_run: dict[int, list[AgentContext]] = {}
    for context in [*mains, *subs]:
        by_run.setdefault(context.run_id, []).append(context)
    events, files, hits = [], [], []
    for run in runs:
        mine, lines = [], []
        for context in by_run[run.pk]:
            mine += _events(context, first_line=len(lines) + 1, lines=lines, rng=rng)
        events += mine
        text = "\n".join(lines) + "\n"
        files.append(RunFile(run=run, path=LOG, kind=RunFile.Kind.LOG, size=len(text.encode()), n_lines=len(lines),
                             content=text))  # fmt: skip
        if run.mode == Run.Mode.CONCURRENT and rng.random() < 0.35:
            hits += _hits(run, mine, rng)
    Event.objects.bulk_create(events, batch_size=BATCH)
    RunFile.objects.bulk_create(files, batch_size=500)
    SignatureHit.objects.bulk_create(hits, batch_size=BATCH)
    return [run.pk for run in runs if run.mode == Run.Mode.CONCURRENT]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _run(rng: random.Random, task: Task, agent: AgentSystem, mode: str) -> Run:
    concurrent = mode == Run.Mode.CONCURRENT
    total = rng.randrange(20, 600)
    passed = round(total * min(1.0, max(0.0, rng.gauss(0.6, 0.25))))
    start = datetime(2026, 8, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 30))
    duration = rng.uniform(300, 3000)
    subs = rng.choice((2, 3, 3, 4)) if concurrent else 0
    n_events = MAIN_EVENTS[concurrent] + subs * (2 + SUB_EVENTS)
    return Run(
        task=task, agent=agent, mode=mode, backbone_model=agent.backbone_model,
        external_id=f"{task.external_id}/{agent.name}/{mode}", source_format="parallax",
        source_name=f"{task.external_id}__{agent.name}__{mode}.jsonl",
        content_hash=_sha(f"{task.external_id}/{agent.name}/{mode}"),
        task_pass=passed == total, tests_passed=passed, tests_total=total, test_pass=passed / total,
        duration_s=round(duration, 1), shell_calls=rng.randrange(5, 80), tokens=rng.randrange(100_000, 2_000_000),
        started_at=start, ended_at=start + timedelta(seconds=duration),
        n_events=n_events, n_contexts=1 + subs, subagents_created=subs, peak_concurrency=subs,
        signatures_version=DETECTOR_VERSION,
        first_spawn_pos=0.2 if concurrent else None, first_overlap_pos=0.25 if concurrent else None,
        overlap_ratio=0.5 if concurrent else 0.0, last_subagent_end_pos=0.8 if concurrent else None,
    )  # fmt: skip


MAIN_EVENTS = {True: 34, False: 60}  # a main agent's own events besides its spawns and joins (concurrent, not)
SUB_EVENTS = 10  # a sub-agent's events
TOOLS = (("tool_call", "Bash"), ("tool_result", "Bash"), ("tool_call", "Read"), ("tool_result", "Read"),
         ("tool_call", "Edit"), ("file_write", "Edit"), ("reasoning", ""), ("message", "assistant"))  # fmt: skip
PATHS = ("src/core.py", "src/api.py", "src/models.py", "tests/test_core.py", "README.md")


def _context(run: Run, external_id: str, main: AgentContext | None) -> AgentContext:
    sub = main is not None
    n = SUB_EVENTS if sub else run.n_events - SUB_EVENTS * run.subagents_created
    return AgentContext(
        run=run,
        parent=main,
        external_id=external_id,
        role="sub" if sub else "main",
        label=f"worker {external_id}" if sub else "main agent",
        started_at=run.started_at,
        ended_at=run.ended_at,
        status="completed",
        n_events=n,
        depth=int(sub),
        position=int(external_id[4:]) + 1 if sub else 0,
        source_file=LOG,
    )


def _events(context: AgentContext, *, first_line: int, lines: list[str], rng: random.Random) -> list[Event]:
    """The context's events, each with its line of the run's log (appended to `lines`)."""
    run = context.run
    if context.role == "sub":
        steps = [("message", "user", "", "")] + [
            (*rng.choice(TOOLS), "", rng.choice(PATHS)) for _ in range(SUB_EVENTS - 1)
        ]
    else:
        own = MAIN_EVENTS[run.mode == Run.Mode.CONCURRENT]
        steps = [("message", "user", "", "")]
        steps += [(*rng.choice(TOOLS), "", rng.choice(PATHS)) for _ in range(own // 2)]
        steps += [("spawn", "spawn_agent", f"sub-{k}", "") for k in range(run.subagents_created)]
        steps += [(*rng.choice(TOOLS), "", rng.choice(PATHS)) for _ in range(own - own // 2 - 2)]
        steps += [("join", "wait", f"sub-{k}", "") for k in range(run.subagents_created)]
        steps.append(("message", "assistant", "", ""))
    events = []
    for seq, (kind, tool, target, path) in enumerate(steps):
        words = rng.randrange(8, 60)
        text = f"[bench data] {kind} {tool} {path} " + " ".join(rng.choice(WORDS) for _ in range(words))
        lines.append(f'{{"type": "{kind}", "agent": "{context.external_id}", "seq": {seq}, "text": "{text}"}}')
        events.append(
            Event(
                run=run,
                context=context,
                seq=seq,
                timestamp=run.started_at + timedelta(seconds=7 * (first_line + seq)),
                kind=kind,
                tool=tool,
                text=text,
                files=[path] if path and kind in ("file_write", "tool_call") else [],
                target=target,
                source_line=first_line + seq,
            )
        )
    return events


WORDS = ("the", "worker", "reads", "module", "test", "fails", "patch", "merge", "handoff", "result", "wait",
         "parent", "child", "file", "line", "diff", "assert", "import", "config", "value")  # fmt: skip


def _hits(run: Run, events: list[Event], rng: random.Random) -> list[SignatureHit]:
    """One or two hits of real detectors, citing two of the run's events."""
    out = []
    for position, detector in enumerate(rng.sample(sorted(DETECTOR_MODES), rng.choice((1, 1, 2)))):
        cited = rng.sample(events, 2)
        out.append(
            SignatureHit(
                run=run,
                detector=detector,
                modes=list(DETECTOR_MODES[detector])[:2],
                evidence=[
                    {
                        "agent": e.context.external_id,
                        "seq": e.seq,
                        "file": f"{LOG}:{e.source_line}",
                        "time": e.timestamp.isoformat(),
                    }
                    for e in cited
                ],  # fmt: skip
                explanation=f"[bench data] {detector}: events {cited[0].seq} and {cited[1].seq} of the run",
                detector_version=DETECTOR_VERSION,
                position=position,
            )
        )
    return out


# -- the study -----------------------------------------------------------------------------------


def study_with_annotators(*, key: str, run_ids: list[int], codebook: Codebook) -> Study:
    """Three annotators `<key>-ann1..3` and the adjudicator `<key>-senior`, through the real services."""
    annotator, adjudicator = (Group.objects.get_or_create(name=role)[0] for role in (ANNOTATOR, ADJUDICATOR))
    annotators = []
    for i in (1, 2, 3):
        user = User.objects.create_user(f"{key}-ann{i}")
        user.groups.add(annotator)
        annotators.append(user)
    senior = User.objects.create_user(f"{key}-senior")
    senior.groups.add(adjudicator)
    study = study_create(
        name=f"bench {key}", codebook=codebook, annotators=annotators, adjudicator=senior, run_ids=run_ids
    )
    study_assign(study=study)
    return study


# -- codings -------------------------------------------------------------------------------------


@dataclass
class Plan:
    """One run's two codings as they will be written: the labels each annotator submitted
    (snapshot form) and, after a consensus, what the second revised to; then how review ends."""

    run_id: int
    assignments: list[Assignment]
    submitted: list[list[dict]]
    outcome: str = "agreed"  # or one of OUTCOMES
    revised: list[dict] | None = None

    def current(self, index: int) -> list[dict]:
        return self.revised if index == 1 and self.revised is not None else self.submitted[index]


def _label(code: Code, instance: int, who: str, run_id: int, lines: int = 40) -> dict:
    """A label as snapshot() records it (codes by key, LABEL_FIELDS): a rationale of three paragraphs,
    two or three evidence anchors and a contrast anchor, on lines the run's log has."""
    rng = random.Random(f"{run_id}/{who}/{code.key}/{instance}")
    paragraphs = [
        f"[bench data] {who}: {code.name}" + (f", episode {instance}" if instance > 1 else "") + ". "
        + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(40, 90)))
        for _ in range(3)
    ]  # fmt: skip
    return {
        "code": code.key,
        "instance": instance,
        "rationale": "\n\n".join(paragraphs),
        "realized_consequence": " ".join(rng.choice(WORDS) for _ in range(20)),
        "evidence": [anchor_text(Run.Mode.CONCURRENT, LOG, rng.randrange(1, lines)) for _ in range(rng.choice((2, 3)))],
        "contrast": [anchor_text(Run.Mode.SEQUENTIAL, LOG, rng.randrange(1, lines))],
        "spans": [],
        "nearest_rejected": None,
        "rejection_reason": "",
        "episode_id": "",
        "comparative_role": "",
    }


def _picked(modes: list[Code], who: str, run_id: int, rng: random.Random) -> list[dict]:
    labels = []
    for code in sorted(modes, key=lambda c: c.position):
        for instance in range(1, 3 if rng.random() < 0.15 else 2):  # now and then a second episode
            labels.append(_label(code, instance, who, run_id))
    return labels


def _snapshot(*, status: str, version: int, labels: list[dict], notes: str = "") -> dict:
    return {
        "status": status,
        "version": version,
        "no_failure": not labels,
        "notes": notes,
        "flagged": False,
        "flag_note": "",
        "skip_reason": "",
        "labels": labels,
    }


def _modes(labels: list[dict]) -> frozenset[str]:
    return frozenset(label["code"] for label in labels)


def _episodes(labels: list[dict]) -> Counter:
    """Each mode's number of episodes: two codings agree when these are equal (run_reconcile)."""
    return Counter(label["code"] for label in labels)


@transaction.atomic
def codings(*, study: Study, rng: random.Random) -> list[Plan]:
    """Every run's codings as far as a coding day got (CODING_DAY): both submitted, with their history; or
    the first submitted and the second a saved draft, or not started; or neither started. Returns the
    plans of the runs both annotators submitted (the review step's input)."""
    modes = list(study.codebook.codes.filter(level=Code.Level.MODE).order_by("position"))
    by_key = {code.key: code for code in modes}
    by_run: dict[int, list[Assignment]] = {}
    for assignment in Assignment.objects.filter(study=study).select_related("annotator").order_by("run_id", "slot"):
        by_run.setdefault(assignment.run_id, []).append(assignment)
    plans, drafts = [], []
    for run_id, pair in by_run.items():
        base = rng.sample(modes, rng.choice((0, 1, 1, 2)))
        second = base if rng.random() < AGREE else rng.sample(modes, 1)
        submitted = [
            _picked(picked, a.annotator.username, run_id, rng) for a, picked in zip(pair, (base, second), strict=True)
        ]
        state = rng.choices([c for c, _ in CODING_DAY], weights=[w for _, w in CODING_DAY])[0]
        plan = Plan(run_id=run_id, assignments=pair, submitted=submitted)
        if state == "both":
            if _episodes(submitted[0]) != _episodes(submitted[1]):  # other modes, or as many episodes otherwise
                plan.outcome = rng.choices([o for o, _ in OUTCOMES], weights=[w for _, w in OUTCOMES])[0]
                if plan.outcome == "consensus":  # the second annotator revises to the first's modes and episodes
                    who = pair[1].annotator.username
                    plan.revised = [_label(by_key[x["code"]], x["instance"], who, run_id) for x in submitted[0]]
            plans.append(plan)
        elif state in ("draft", "one"):
            drafts.append((plan, state))
    now = timezone.now()
    notes = "[bench data]"
    # (annotation, assignment, its plan, which coding, submitted or a draft)
    written = [(a, plan, k, True) for plan in plans for k, a in enumerate(plan.assignments)]
    written += [(plan.assignments[0], plan, 0, True) for plan, _ in drafts]
    written += [(plan.assignments[1], plan, 1, False) for plan, state in drafts if state == "draft"]
    annotations = Annotation.objects.bulk_create(
        [
            Annotation(
                assignment=a,
                status=Annotation.Status.SUBMITTED if submitted else Annotation.Status.DRAFT,
                version=(4 if k == 1 and plan.revised is not None else 3) if submitted else 2,
                no_failure=not plan.current(k),
                notes=notes,
                submitted_at=now if submitted else None,
            )
            for a, plan, k, submitted in written
        ],
        batch_size=BATCH,
    )
    codes = {c.key: c.pk for c in study.codebook.codes.filter(level=Code.Level.MODE)}
    labels, history = [], []
    for annotation, (assignment, plan, k, submitted) in zip(annotations, written, strict=True):
        labels += [
            Label(
                annotation=annotation,
                code_id=codes[label["code"]],
                **{name: value for name, value in label.items() if name not in ("code", "nearest_rejected")},
            )
            for label in plan.current(k)
        ]
        first = plan.submitted[k]
        empty = _snapshot(status="draft", version=1, labels=[])
        saved = _snapshot(status="draft", version=2, labels=first, notes=notes)
        locked = _snapshot(status="submitted", version=3, labels=first, notes=notes)
        steps = [("save", empty, saved)] + ([("submit", saved, locked)] if submitted else [])
        if k == 1 and plan.revised is not None:
            steps.append(("revise", locked, _snapshot(status="submitted", version=4, labels=plan.revised, notes=notes)))
        history += [
            AuditEntry(annotation=annotation, actor=assignment.annotator, action=action, before=before, after=after)
            for action, before, after in steps
        ]
    Label.objects.bulk_create(labels, batch_size=BATCH)
    AuditEntry.objects.bulk_create(history, batch_size=BATCH)
    return plans


# -- reviews -------------------------------------------------------------------------------------


def _merged(plan: Plan) -> dict[tuple[str, int], dict]:
    """As review.merged_labels: per (mode, instance) both annotators' texts, anchors united."""
    merged: dict[tuple[str, int], dict] = {}
    for k, assignment in enumerate(plan.assignments):
        for label in plan.current(k):
            entry = merged.setdefault((label["code"], label["instance"]), {"rationale": "", "evidence": []})
            text = f"[{assignment.annotator.username}] {label['rationale']}"
            entry["rationale"] = entry["rationale"] + "\n\n" + text if entry["rationale"] else text
            entry["evidence"] += [a for a in label["evidence"] if a not in entry["evidence"]]
    return merged


def _codes(keys) -> str:
    return ", ".join(sorted(keys)) or "no failure mode"


@transaction.atomic
def reviews(*, study: Study, plans: list[Plan]) -> None:
    """Finals, discussions, comments and the activity log, as the review services leave them."""
    codes = {c.key: c.pk for c in study.codebook.codes.filter(level=Code.Level.MODE)}
    senior = study.adjudicator
    now = timezone.now()
    discussed = [plan for plan in plans if plan.outcome != "agreed"]
    discussions = Discussion.objects.bulk_create(
        [
            Discussion(
                study=study,
                run_id=plan.run_id,
                agreement=1.0 - masi_distance(*(_modes(labels) for labels in plan.submitted)),
                status=plan.outcome,  # consensus, adjudicated, escalated or open: Discussion.Status values
                escalated_at=now if plan.outcome in ("adjudicated", "escalated") else None,
                escalated_by=plan.assignments[0].annotator if plan.outcome in ("adjudicated", "escalated") else None,
                resolved_at=now if plan.outcome in ("consensus", "adjudicated") else None,
            )
            for plan in discussed
        ],
        batch_size=BATCH,
    )
    comments, activity = [], []
    for plan, discussion in zip(discussed, discussions, strict=True):
        first, second = (_modes(labels) for labels in plan.submitted)
        activity.append(
            ActivityEntry(
                action="discussion.open",
                study_id=study.pk,
                run_id=plan.run_id,
                summary=f"the codings differ ({_codes(first)} / {_codes(second)}): discussion opened",
                detail={"agreement": discussion.agreement, "flagged": []},
            )
        )
        for assignment in plan.assignments:
            comments.append(
                Comment(
                    discussion=discussion,
                    author=assignment.annotator,
                    text=f"[bench data] {assignment.annotator.username} on run {plan.run_id}: "
                    + " ".join(WORDS[(plan.run_id + i) % len(WORDS)] for i in range(60)),
                )
            )
        if plan.outcome in ("adjudicated", "escalated"):
            activity.append(
                ActivityEntry(
                    action="discussion.escalate",
                    actor=plan.assignments[0].annotator,
                    study_id=study.pk,
                    run_id=plan.run_id,
                    summary="escalated to the adjudicator",
                )
            )
    Comment.objects.bulk_create(comments, batch_size=BATCH)

    decided = [plan for plan in plans if plan.outcome not in ("escalated", "open")]
    finals = FinalCoding.objects.bulk_create(
        [
            FinalCoding(
                study=study,
                run_id=plan.run_id,
                provenance=plan.outcome,
                no_failure=not plan.current(0),
                decided_by={"agreed": None, "consensus": plan.assignments[1].annotator, "adjudicated": senior}[
                    plan.outcome
                ],
                note="[bench data] ruling" if plan.outcome == "adjudicated" else "",
            )
            for plan in decided
        ],
        batch_size=BATCH,
    )
    final_labels = []
    for plan, final in zip(decided, finals, strict=True):
        # An adjudicator rules on the first coder's modes and episodes here; agreed and consensus finals merge both.
        ruled = {(x["code"], x["instance"]) for x in plan.submitted[0]}
        for (key, instance), fields in _merged(plan).items():
            if plan.outcome == "adjudicated" and (key, instance) not in ruled:
                continue
            if plan.outcome == "adjudicated":  # the ruling's rationale decides, on every episode
                fields = {**fields, "rationale": f"[bench data] ruled: {key}"}
            final_labels.append(
                FinalLabel(
                    final=final,
                    code_id=codes[key],
                    instance=instance,
                    provenance=plan.outcome,
                    decided_by=final.decided_by,
                    **fields,
                )
            )
        modes = sorted(_modes(plan.current(0)))
        summary = {
            "agreed": f"both codings agree: {_codes(modes)}",
            "consensus": f"consensus after discussion: {_codes(modes)}",
            "adjudicated": f"adjudicated: {_codes(modes)}",
        }[plan.outcome]
        activity.append(
            ActivityEntry(
                action=f"final.{plan.outcome}",
                actor=final.decided_by,
                study_id=study.pk,
                run_id=plan.run_id,
                summary=summary,
                detail={"modes": modes},
            )
        )
    FinalLabel.objects.bulk_create(final_labels, batch_size=BATCH)
    ActivityEntry.objects.bulk_create(activity, batch_size=BATCH)
