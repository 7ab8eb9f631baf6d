"""A coded study at any scale, fast, for the benchmarks: bulk inserts in the shapes the real
services write, so that every page reads what it would read after the same work done by hand.

One study = `tasks` tasks × 3 agent systems, each a concurrent run and its sequential twin; the
study holds every concurrent run, each coded by two of its three annotators, submitted and
reconciled. Step by step (one function each, called by `build_study`):

  corpus     tasks and runs with outcomes and process metrics; a main agent (and two sub-agents on
             a concurrent run) with a handful of events each — page_bench.py covers what grows with
             a run, this covers what grows with a study;
  study      the real `study_create` and `study_assign` (three annotators and an adjudicator);
  codings    per assignment an Annotation (submitted, version 3) with its Labels and the two
             AuditEntry rows `annotation_save` and `annotation_submit` write ("save", "submit"),
             before/after as `snapshot()` takes them — agreement reads the first submit's `after`;
  reviews    as `run_reconcile` and the review services: agreeing codings → an agreed FinalCoding
             (labels merged as `merged_labels` merges them); differing ones → a Discussion with a
             comment from each annotator, then consensus (the second annotator's "revise" entry),
             adjudication, or still escalated and waiting for the adjudicator (no final yet: the
             adjudication queue has work); each step's activity log entry.

Nothing here is a result: rationales say "[bench data]".
"""

from __future__ import annotations

import hashlib
import random
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
from trajectories.models import AgentContext, AgentSystem, Benchmark, Event, Run, Task

SCALES = {"demo": 14, "paper": 354, "10x": 3540}  # tasks; runs = tasks × 3 agents × 2 modes
BATCH = 2000
AGREE = 0.76  # chance the second coder picks the first's modes: ~24% of runs discussed
OUTCOMES = (("consensus", 0.40), ("adjudicated", 0.35), ("escalated", 0.25))  # of the discussions
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
    events = []
    for context in [*mains, *subs]:
        events += _events(context)
    Event.objects.bulk_create(events, batch_size=BATCH)
    return [run.pk for run in runs if run.mode == Run.Mode.CONCURRENT]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _run(rng: random.Random, task: Task, agent: AgentSystem, mode: str) -> Run:
    concurrent = mode == Run.Mode.CONCURRENT
    total = rng.randrange(20, 600)
    passed = round(total * min(1.0, max(0.0, rng.gauss(0.6, 0.25))))
    start = datetime(2026, 8, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 30))
    duration = rng.uniform(300, 3000)
    subs = 2 if concurrent else 0
    return Run(
        task=task, agent=agent, mode=mode, backbone_model=agent.backbone_model,
        external_id=f"{task.external_id}/{agent.name}/{mode}", source_format="parallax",
        source_name=f"{task.external_id}__{agent.name}__{mode}.jsonl",
        content_hash=_sha(f"{task.external_id}/{agent.name}/{mode}"),
        task_pass=passed == total, tests_passed=passed, tests_total=total, test_pass=passed / total,
        duration_s=round(duration, 1), shell_calls=rng.randrange(5, 80), tokens=rng.randrange(100_000, 2_000_000),
        started_at=start, ended_at=start + timedelta(seconds=duration),
        n_events=4 + 4 * subs, n_contexts=1 + subs, subagents_created=subs, peak_concurrency=subs,
        first_spawn_pos=0.2 if concurrent else None, first_overlap_pos=0.25 if concurrent else None,
        overlap_ratio=0.5 if concurrent else 0.0, last_subagent_end_pos=0.8 if concurrent else None,
    )  # fmt: skip


def _context(run: Run, external_id: str, main: AgentContext | None) -> AgentContext:
    sub = main is not None
    n = 2 if sub else run.n_events - 2 * run.subagents_created
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


def _events(context: AgentContext) -> list[Event]:
    run = context.run
    if context.role == "sub":
        steps = [("tool_call", "Read", "", "src/core.py"), ("file_write", "Edit", "", "src/core.py")]
    else:
        steps = [("message", "user", "", ""), ("tool_call", "Bash", "", "")]
        for k in range(run.subagents_created):
            steps.append(("spawn", "spawn_agent", f"sub-{k}", ""))
        for k in range(run.subagents_created):
            steps.append(("join", "wait", f"sub-{k}", ""))
        steps += [("file_write", "Write", "", "src/api.py"), ("message", "assistant", "", "")]
    first_line = 3 + 10 * context.position
    return [
        Event(
            run=run,
            context=context,
            seq=seq,
            timestamp=run.started_at + timedelta(seconds=30 * seq),
            kind=kind,
            tool=tool,
            text=f"[bench data] {tool} {seq}",
            files=[path] if path else [],
            target=target,
            source_line=first_line + seq,
        )
        for seq, (kind, tool, target, path) in enumerate(steps)
    ]


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


def _label(code: Code, instance: int, who: str, run_id: int) -> dict:
    """A label as snapshot() records it (codes by key, LABEL_FIELDS)."""
    return {
        "code": code.key,
        "instance": instance,
        "rationale": f"[bench data] {who}: {code.name}" + (f", episode {instance}" if instance > 1 else ""),
        "realized_consequence": "",
        "evidence": [anchor_text(Run.Mode.CONCURRENT, LOG, 3 + (run_id + instance) % 4)],
        "contrast": [],
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


@transaction.atomic
def codings(*, study: Study, rng: random.Random) -> list[Plan]:
    """Both codings of every run, submitted, with their history; returns the plans."""
    modes = list(study.codebook.codes.filter(level=Code.Level.MODE).order_by("position"))
    by_run: dict[int, list[Assignment]] = {}
    for assignment in Assignment.objects.filter(study=study).select_related("annotator").order_by("run_id", "slot"):
        by_run.setdefault(assignment.run_id, []).append(assignment)
    plans = []
    for run_id, pair in by_run.items():
        base = rng.sample(modes, rng.choice((0, 1, 1, 2)))
        second = base if rng.random() < AGREE else rng.sample(modes, 1)
        submitted = [
            _picked(picked, a.annotator.username, run_id, rng) for a, picked in zip(pair, (base, second), strict=True)
        ]
        plan = Plan(run_id=run_id, assignments=pair, submitted=submitted)
        if _modes(submitted[0]) != _modes(submitted[1]):
            plan.outcome = rng.choices([o for o, _ in OUTCOMES], weights=[w for _, w in OUTCOMES])[0]
            if plan.outcome == "consensus":  # the second annotator revises to the first's modes
                plan.revised = _picked(base, pair[1].annotator.username, run_id, rng)
        plans.append(plan)
    now = timezone.now()
    notes = "[bench data]"
    annotations = Annotation.objects.bulk_create(
        [
            Annotation(
                assignment=a,
                status=Annotation.Status.SUBMITTED,
                version=4 if k == 1 and plan.revised is not None else 3,
                no_failure=not plan.current(k),
                notes=notes,
                submitted_at=now,
            )
            for plan in plans
            for k, a in enumerate(plan.assignments)
        ],
        batch_size=BATCH,
    )
    codes = {c.key: c.pk for c in study.codebook.codes.filter(level=Code.Level.MODE)}
    labels, history = [], []
    rows = iter(annotations)
    for plan in plans:
        for k, assignment in enumerate(plan.assignments):
            annotation = next(rows)
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
            steps = [("save", empty, saved), ("submit", saved, locked)]
            if k == 1 and plan.revised is not None:
                steps.append(
                    ("revise", locked, _snapshot(status="submitted", version=4, labels=plan.revised, notes=notes))
                )
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
                status=plan.outcome,  # consensus, adjudicated or escalated: Discussion.Status values
                escalated_at=now if plan.outcome != "consensus" else None,
                escalated_by=plan.assignments[0].annotator if plan.outcome != "consensus" else None,
                resolved_at=now if plan.outcome != "escalated" else None,
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
                    text=f"[bench data] {assignment.annotator.username} on run {plan.run_id}",
                )
            )
        if plan.outcome != "consensus":
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

    decided = [plan for plan in plans if plan.outcome != "escalated"]
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
        # An adjudicator rules on the first coder's modes here; agreed and consensus finals merge both.
        for (key, instance), fields in _merged(plan).items():
            if plan.outcome == "adjudicated" and key not in _modes(plan.submitted[0]):
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
