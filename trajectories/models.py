"""Runs of coding agents, their agent contexts (main + sub-agents) and events."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Benchmark(models.Model):
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    class Difficulty(models.TextChoices):
        EASY = "easy"
        MEDIUM = "medium"
        HARD = "hard"
        UNKNOWN = "", "unknown"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="tasks")
    external_id = models.CharField(max_length=255, help_text="The benchmark's own task id.")
    difficulty = models.CharField(max_length=20, blank=True, default="")
    prompt_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["benchmark__name", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "external_id"], name="task_unique_per_benchmark"),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark.name}/{self.external_id}"


class AgentSystem(models.Model):
    name = models.CharField(max_length=100, unique=True, help_text="e.g. Codex, Claude Code, Kimi Code.")
    backbone_model = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ImportBatch(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Origin(models.TextChoices):
        UPLOAD = "upload"  # the Import page or POST /api/imports/: a file imported by the worker
        COMMAND = "command"  # manage.py import_trajectories PATH...

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.UPLOAD)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(null=True, blank=True, help_text="Last progress written while running.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    source_name = models.CharField(
        max_length=255, blank=True, default="", help_text="The uploaded file, or the paths given to the command."
    )
    upload_path = models.CharField(max_length=500, blank=True, default="")
    format = models.CharField(max_length=20, default="auto")
    options = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="The command's options as given (--format, --manifest, --replace).",
    )
    total = models.PositiveIntegerField(default=0, help_text="Runs found.")
    processed = models.PositiveIntegerField(default=0)
    imported = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    replaced = models.PositiveIntegerField(default=0, help_text="Stored runs read again in place (--replace).")
    failed = models.PositiveIntegerField(default=0)
    events = models.PositiveBigIntegerField(default=0)
    report = models.JSONField(default=list, blank=True, help_text="One entry per run source and per error.")
    error = models.TextField(blank=True, default="", help_text="Why the whole batch failed, if it did.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import #{self.pk} ({self.status})"

    @property
    def progress_percent(self) -> int:
        if self.is_finished:
            return 100
        return int(100 * self.processed / self.total) if self.total else 0

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class Run(models.Model):
    class Mode(models.TextChoices):
        CONCURRENT = "concurrent"
        SEQUENTIAL = "sequential"

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey(AgentSystem, on_delete=models.PROTECT, related_name="runs")
    mode = models.CharField(max_length=10, choices=Mode.choices)
    backbone_model = models.CharField(max_length=100, blank=True, default="")
    external_id = models.CharField(max_length=255, blank=True, default="", help_text="run_id from the source.")
    source_format = models.CharField(max_length=20)
    source_name = models.CharField(max_length=500)
    content_hash = models.CharField(max_length=64, unique=True, help_text="sha256 of the source bytes.")
    batch = models.ForeignKey(ImportBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    imported_at = models.DateTimeField(auto_now_add=True)
    warnings = models.JSONField(default=list, blank=True)

    # Outcomes (null = not reported by the source).
    task_pass = models.BooleanField(null=True)
    tests_passed = models.PositiveIntegerField(null=True)
    tests_total = models.PositiveIntegerField(null=True)
    test_pass = models.FloatField(null=True, help_text="Fraction of tests passed, 0..1.")
    duration_s = models.FloatField(null=True)
    shell_calls = models.PositiveIntegerField(null=True)
    tokens = models.PositiveBigIntegerField(null=True)
    # Where tests passed/total come from, and SWE-bench's groups when its report gives them
    # (evaluation.py; the tests themselves are TestOutcome rows).
    tests_source = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="The file tests passed/total were read from (a RunFile path, or cell.json); empty: the header's.",
    )
    f2p_passed = models.PositiveIntegerField(null=True, help_text="FAIL_TO_PASS tests passed (SWE-bench report).")
    f2p_total = models.PositiveIntegerField(null=True)
    p2p_passed = models.PositiveIntegerField(null=True, help_text="PASS_TO_PASS tests passed (SWE-bench report).")
    p2p_total = models.PositiveIntegerField(null=True)

    started_at = models.DateTimeField(null=True)
    ended_at = models.DateTimeField(null=True)
    n_events = models.PositiveIntegerField(default=0)
    n_contexts = models.PositiveIntegerField(default=0)

    # Process metrics (docs/metrics.md), stored at import.
    subagents_created = models.PositiveIntegerField(default=0)
    peak_concurrency = models.PositiveIntegerField(default=0)
    first_spawn_pos = models.FloatField(null=True)
    first_overlap_pos = models.FloatField(null=True)
    overlap_ratio = models.FloatField(default=0.0)
    last_subagent_end_pos = models.FloatField(null=True)
    created_without_overlap = models.BooleanField(default=False)

    # Failure signatures (docs/signatures.md): the hits are SignatureHit rows.
    signatures_version = models.PositiveSmallIntegerField(
        null=True, help_text="Detector version of the stored hits (null: never checked)."
    )
    signatures_note = models.CharField(
        max_length=200, blank=True, default="", help_text="Why no signature could be checked, if so."
    )

    class Meta:
        ordering = ["task__benchmark__name", "task__external_id", "agent__name", "mode"]
        constraints = [
            # One run per (task, agent, mode): that is what makes a pair unambiguous.
            models.UniqueConstraint(fields=["task", "agent", "mode"], name="run_unique_task_agent_mode"),
            models.CheckConstraint(
                condition=Q(tests_passed__isnull=True)
                | Q(tests_total__isnull=True)
                | Q(tests_passed__lte=models.F("tests_total")),
                name="run_tests_passed_lte_total",
            ),
            models.CheckConstraint(
                condition=Q(test_pass__isnull=True) | (Q(test_pass__gte=0) & Q(test_pass__lte=1)),
                name="run_test_pass_fraction",
            ),
        ]
        indexes = [models.Index(fields=["mode", "agent"])]

    def __str__(self) -> str:
        return f"{self.task} · {self.agent.name} · {self.mode}"

    @property
    def twin_mode(self) -> str:
        return self.Mode.SEQUENTIAL if self.mode == self.Mode.CONCURRENT else self.Mode.CONCURRENT


class AgentContext(models.Model):
    class Role(models.TextChoices):
        MAIN = "main"
        SUB = "sub"

    # No index on `run` alone: the unique (run, external_id) leads with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="contexts", db_index=False)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    external_id = models.CharField(max_length=255)
    role = models.CharField(max_length=4, choices=Role.choices)
    label = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True)
    ended_at = models.DateTimeField(null=True)
    status = models.CharField(max_length=50, blank=True, default="")
    n_events = models.PositiveIntegerField(default=0)
    files_touched = models.JSONField(default=list, blank=True)
    depth = models.PositiveSmallIntegerField(default=0)
    position = models.PositiveIntegerField(default=0, help_text="Order of appearance in the run.")
    source_file = models.CharField(
        max_length=1000, blank=True, default="", help_text="The file its events were read from (a RunFile path)."
    )
    # An agent of a workflow (Claude Code): a workflow runs its agents in named slots, and a slot that
    # stalls or fails is started again under a new agent id, so each attempt is an agent of its own.
    workflow = models.CharField(max_length=255, blank=True, default="", help_text="The workflow's run id, if any.")
    slot = models.CharField(max_length=255, blank=True, default="", help_text="The workflow slot it fills.")
    attempt = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Which attempt of its slot (1-based).")
    attempts = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Attempts its slot had in all.")

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "external_id"], name="context_unique_per_run"),
            models.CheckConstraint(
                condition=Q(attempt__isnull=True)
                | (Q(attempt__gte=1) & (Q(attempts__isnull=True) | Q(attempt__lte=models.F("attempts")))),
                name="context_attempt_within_attempts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.external_id}"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.ended_at:
            return (self.ended_at - self.started_at).total_seconds()
        return None

    @property
    def retried(self) -> bool:
        return bool(self.attempts and self.attempts > 1)


class Event(models.Model):
    # Events are the one table that grows to millions of rows: no single-column indexes on the
    # keys, since (run, kind) and the unique (context, seq) lead with them.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    context = models.ForeignKey(AgentContext, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    timestamp = models.DateTimeField(null=True)
    kind = models.CharField(max_length=12)
    tool = models.CharField(max_length=100, blank=True, default="")
    text = models.TextField(blank=True, default="")
    files = models.JSONField(default=list, blank=True)
    target = models.CharField(max_length=255, blank=True, default="")
    source_line = models.PositiveIntegerField(null=True, help_text="Line in the source file, for evidence anchors.")
    source_file = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="The file of source_line when it is not its agent's (a later round of an outer loop); "
        "empty: the agent's own file (AgentContext.source_file).",
    )

    class Meta:
        ordering = ["context", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["context", "seq"], name="event_unique_seq_per_context"),
        ]
        indexes = [models.Index(fields=["run", "kind"])]

    def __str__(self) -> str:
        return f"{self.kind} #{self.seq}"

    @property
    def line_file(self) -> str:
        """The run file its source_line is a line of: its own when it says, else its agent's."""
        return self.source_file or self.context.source_file


class RunFile(models.Model):
    """A file of a run as imported: its logs (path and length, for evidence anchors) and the study
    cell's artifacts beside them (patch, final answer, prompt, evaluation, test output), kept whole
    up to a size limit so that the coding view can show them and an anchor can open their lines."""

    class Kind(models.TextChoices):
        LOG = "log"
        PATCH = "patch", "patch"
        FINAL = "final", "final answer"
        PROMPT = "prompt"
        EVALUATION = "evaluation", "evaluation summary"
        TEST_OUTPUT = "test_output", "test output"
        STATUS = "status", "harness status"
        CELL = "cell", "cell record"
        OTHER = "other"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="files", db_index=False)
    path = models.CharField(max_length=1000, help_text="Relative to the run's folder: agent/…, cell/model.patch.")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    size = models.PositiveBigIntegerField(help_text="Bytes on disk.")
    n_lines = models.PositiveIntegerField(null=True, help_text="Lines in the file (null: not counted, e.g. gzip).")
    content = models.TextField(
        blank=True, default="", help_text="The text (logs too: a cited line opens as written); empty for a .gz log."
    )
    truncated = models.BooleanField(default=False, help_text="Content cut at the size limit.")

    class Meta:
        ordering = ["run", "path"]
        constraints = [models.UniqueConstraint(fields=["run", "path"], name="run_file_unique_path")]

    def __str__(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class SignatureHit(models.Model):
    """One failure-signature hit found in a run by a detector of trajectories/signatures.py
    (docs/signatures.md): evidence for an annotator to confirm or reject, never a label.
    Written at import and replaced whole by `detect_signatures`."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="signature_hits", db_index=False)
    detector = models.CharField(max_length=50)
    modes = models.JSONField(default=list, help_text="Codebook mode keys the hit supports.")
    evidence = models.JSONField(
        default=list,
        help_text="[{agent, seq, file, time, note, source, line}]: the events (or lines of a run file, such as the "
        "final patch's) that show it, each with what it shows in words.",
    )
    explanation = models.TextField()
    wrong_if = models.TextField(blank=True, default="", help_text="What would make the hit wrong: what to look for.")
    detector_version = models.PositiveSmallIntegerField()
    position = models.PositiveSmallIntegerField(default=0, help_text="Order among the run's hits.")

    class Meta:
        ordering = ["run", "position"]
        # Leads with run: the run page reads a run's hits in order; `detect_signatures` deletes them.
        indexes = [models.Index(fields=["run", "position"], name="signature_hit_run_position")]

    def __str__(self) -> str:
        return f"{self.detector} in run {self.run_id}"


class TestOutcome(models.Model):
    """One test's result as one file of a run's evaluation states it (trajectories/evaluation.py):
    SWE-bench's report (with the test's group), the report as its harness logged it, Django's runner
    or pytest output, or an evaluation summary's per-test list. Stored at import, so that the pair
    page, the file page and the per-test export read rows and never parse a file again.

    A row per test *and file*, not one merged row per test: a run's files may disagree (SWE-bench's
    grading can count as failed a test whose output line says ok), and each file's page lists what
    was read from it, at its own lines. `primary` marks the file whose tests are the run's test list
    (the first by precedence that lists tests: docs/format.md), the one the pair page and the export
    show; the run's counts are stored on the run (`tests_passed`, `f2p_passed` …, `tests_source`)."""

    __test__ = False  # a model, not a pytest test class

    class Outcome(models.TextChoices):
        PASSED = "passed", "passed"
        FAILED = "failed", "failed"
        ERROR = "error", "error"
        SKIPPED = "skipped", "skipped"
        XFAILED = "xfailed", "expected failure"
        XPASSED = "xpassed", "unexpected success"
        UNFINISHED = "unfinished", "no result"
        OTHER = "other", "other"

    class Group(models.TextChoices):  # SWE-bench's names, shown as they are written
        FAIL_TO_PASS = "FAIL_TO_PASS", "FAIL_TO_PASS"
        PASS_TO_PASS = "PASS_TO_PASS", "PASS_TO_PASS"
        FAIL_TO_FAIL = "FAIL_TO_FAIL", "FAIL_TO_FAIL"
        PASS_TO_FAIL = "PASS_TO_FAIL", "PASS_TO_FAIL"
        UNKNOWN = "", "not known"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="test_outcomes", db_index=False)
    source = models.CharField(max_length=1000, help_text="The file it was read from (a RunFile path).")
    primary = models.BooleanField(default=False, help_text="Read from the file that gives the run's test list.")
    position = models.PositiveIntegerField(help_text="Order among the run's rows: by file, then as the file lists.")
    name = models.TextField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    group = models.CharField(max_length=12, choices=Group.choices, blank=True, default="")
    line = models.PositiveIntegerField(null=True, help_text="The line of `source` it was read from.")
    detail = models.CharField(
        max_length=300, blank=True, default="", help_text="A skip's reason, failing sub-tests, a docstring …"
    )

    class Meta:
        ordering = ["run", "position"]
        # Leads with run: the pair page and the export read a run's primary rows in order.
        indexes = [models.Index(fields=["run", "primary", "position"], name="test_outcome_run_primary")]

    def __str__(self) -> str:
        return f"{self.name}: {self.outcome}"

    @property
    def passing(self) -> bool:
        return self.outcome in (self.Outcome.PASSED, self.Outcome.XFAILED)
