"""Studies, double assignment, annotations with labels, their history, and final labels."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import models
from django.db.models import Q

from common.text import LONG_TEXT
from taxonomy.models import Code, Codebook, FrozenCodebookError
from trajectories.models import Run

from .analysis.reports import Rq4Rules
from .fields import DocumentJSONField
from .hint_policies import DEFAULT_HINT_POLICY, HINT_POLICIES, hints_allowed
from .study_settings import CODE_UNIVERSES, DEFAULT_CODE_UNIVERSE, rq4_settings

User = settings.AUTH_USER_MODEL


class Study(models.Model):
    name = models.CharField(max_length=200, unique=True)
    codebook = models.ForeignKey(
        Codebook, on_delete=models.PROTECT, related_name="studies", help_text="The pinned (frozen) codebook version."
    )
    runs = models.ManyToManyField(
        Run,
        related_name="studies",
        blank=True,
        help_text="Runs in scope (default: every concurrent run with a sequential twin).",
    )
    annotators = models.ManyToManyField(User, related_name="annotator_studies")
    adjudicator = models.ForeignKey(User, on_delete=models.PROTECT, related_name="adjudicated_studies")
    seed = models.IntegerField(default=0, help_text="Makes the assignment reproducible.")
    coders_per_run = models.PositiveSmallIntegerField(
        default=2, help_text="How many of the annotators code each run independently (k, 2 ≤ k ≤ annotators)."
    )
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the study was closed: nothing more is assigned, coded or added."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    statistics_version = models.PositiveIntegerField(
        default=0, help_text="Counts the changes to what the statistics are computed from (codings, final labels)."
    )
    statistics_queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When a refresh of the statistics was queued and has not started yet."
    )
    kappa_universe = models.CharField(
        max_length=10,
        choices=list(CODE_UNIVERSES.items()),
        default=DEFAULT_CODE_UNIVERSE,
        help_text="The codes agreement is computed over: every code of the codebook, or those observed in the study.",
    )
    queue_by_uncertainty = models.BooleanField(
        default=False,
        help_text="Annotators' untouched runs are ordered by the suggestions model's uncertainty, most uncertain "
        "first (docs/suggestions.md); annotators see only the order, never the model.",
    )
    rq4_settings = models.JSONField(
        default=dict,
        blank=True,
        help_text='RQ4: {"rules": {...}, "mechanisms": [[key, label], ...]}; empty for the defaults '
        "(annotation/study_settings.py).",
    )
    hint_policy = models.CharField(
        max_length=25,
        choices=list(HINT_POLICIES.items()),
        default=DEFAULT_HINT_POLICY,
        help_text="When annotators see the failure-signature hints of a run they code: never, after their first "
        "submission of it (protects independent coding), or always. The adjudicator always sees them.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(coders_per_run__gte=2), name="study_two_or_more_coders_per_run"),
            models.CheckConstraint(
                condition=Q(kappa_universe__in=list(CODE_UNIVERSES)), name="study_kappa_universe_known"
            ),
            models.CheckConstraint(condition=Q(hint_policy__in=list(HINT_POLICIES)), name="study_hint_policy_known"),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, repin: bool = False, **kwargs) -> None:
        # Pinned means pinned: a study codes against one frozen codebook version. It moves to another
        # frozen version only through study_move_codebook (services/codebook_move.py), which maps its
        # labels and records the move: that service alone passes `repin=True`.
        if not Codebook.objects.filter(pk=self.codebook_id, status=Codebook.Status.FROZEN).exists():
            raise FrozenCodebookError(f"{self.name}: a study pins a frozen codebook version, not a draft")
        if self.pk is not None and not repin:
            pinned = Study.objects.filter(pk=self.pk).values_list("codebook_id", flat=True).first()
            if pinned is not None and pinned != self.codebook_id:
                raise FrozenCodebookError(
                    f"{self.name}: its codebook is pinned; move it to another version with a key map"
                )
        super().save(*args, **kwargs)

    def shows_hints(self, *, submitted: bool) -> bool:
        """Does this study's hint policy show hints to an annotator who has (not) submitted the run?"""
        return hints_allowed(self.hint_policy, submitted=submitted)

    def rq4(self) -> tuple[Rq4Rules, list[tuple[str, str]]]:
        """RQ4's rules and mechanism tags for this study (the defaults unless set)."""
        return rq4_settings(self.rq4_settings)


class StudyCodebookMove(models.Model):
    """A study moving from one frozen codebook version to another, with the key map that carried
    its labels over: labels of renamed and merged codes were re-pointed, codings that used a split
    code were reopened for re-coding (`reopened`). Agreement is reported per version: a coding
    belongs to the version the study pinned when it was submitted."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="codebook_moves")
    from_codebook = models.ForeignKey(Codebook, on_delete=models.PROTECT, related_name="+")
    to_codebook = models.ForeignKey(Codebook, on_delete=models.PROTECT, related_name="+")
    key_map = models.JSONField(
        help_text="Old mode key → list of new keys: one (rename, or merge when several share it) or more (split)."
    )
    actor = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    note = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    mapped_labels = models.PositiveIntegerField(default=0, help_text="Labels re-pointed one to one.")
    reopened = models.PositiveIntegerField(default=0, help_text="Codings reopened for re-coding (a split).")

    class Meta:
        ordering = ["study", "at", "pk"]

    def __str__(self) -> str:
        return f"{self.study}: {self.from_codebook} → {self.to_codebook}"


class StudyStatistics(models.Model):
    """A study's statistics (agreement with its bootstrap CI, per-code κ, κ over time, Table 3, RQ1,
    RQ4 candidates) as computed by the worker from one version of its inputs: the dashboard and the
    exports read them from here, and say so when the study has changed since."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="statistics")
    version = models.PositiveIntegerField(help_text="The study's statistics_version these were computed from.")
    computed_at = models.DateTimeField()
    seconds = models.FloatField(help_text="How long the computation took.")
    payload = models.JSONField(help_text="The study's analysis document (annotation/analysis/document.py).")
    helped = models.JSONField(
        default=list, help_text="The RQ4 candidates: [concurrent run id, sequential run id, [reasons]], in run order."
    )

    class Meta:
        verbose_name_plural = "study statistics"

    def __str__(self) -> str:
        return f"statistics of {self.study} (version {self.version})"


class StudyBundle(models.Model):
    """A study's reproducibility bundle (annotation/selectors/bundle.py), built by the worker from the
    stored analysis and written to disk under MEDIA_ROOT/bundles/, then offered for download; the page
    follows its progress (tables written of all)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="bundles")
    status = models.CharField(max_length=7, choices=Status.choices, default=Status.PENDING)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    steps_done = models.PositiveSmallIntegerField(default=0, help_text="Files of the bundle written so far.")
    steps_total = models.PositiveSmallIntegerField(default=0)
    version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The statistics version (the study's inputs) the bundle was built from."
    )
    path = models.CharField(max_length=500, blank=True, default="", help_text="The zip, relative to MEDIA_ROOT.")
    size = models.PositiveBigIntegerField(default=0, help_text="The zip's size in bytes.")
    seconds = models.FloatField(null=True, blank=True, help_text="How long the worker took to build it.")
    error = models.TextField(blank=True, default="", help_text="Why it failed, if it did.")

    class Meta:
        ordering = ["study", "-created_at", "-pk"]

    def __str__(self) -> str:
        return f"bundle #{self.pk} of {self.study} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def progress_percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return int(100 * self.steps_done / self.steps_total) if self.steps_total else 0


class Assignment(models.Model):
    """One annotator coding one run. Slots 1..k (the study's coders_per_run) make 'at most k per run'
    a database rule: unique per run, and a trigger refuses a slot above the study's k (migration 0012)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="assignments")
    annotator = models.ForeignKey(User, on_delete=models.PROTECT, related_name="assignments")
    slot = models.PositiveSmallIntegerField()
    position = models.PositiveIntegerField(
        help_text="Place in this annotator's queue for the study (1, 2, …): the queue's order and its page cursor."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "run", "slot"]
        constraints = [
            models.CheckConstraint(condition=Q(slot__gte=1), name="assignment_slot_from_one"),
            models.UniqueConstraint(fields=["study", "run", "slot"], name="assignment_k_per_run"),
            models.UniqueConstraint(fields=["study", "run", "annotator"], name="assignment_once_per_annotator"),
            models.UniqueConstraint(fields=["study", "annotator", "position"], name="assignment_queue_position"),
        ]

    def __str__(self) -> str:
        return f"{self.study} · run {self.run_id} · slot {self.slot}"


class Annotation(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="annotation")
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.DRAFT)
    version = models.PositiveIntegerField(default=1, help_text="Optimistic lock: every save must name it.")
    no_failure = models.BooleanField(default=False, help_text="Explicitly: no failure mode in this run.")
    notes = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    skip_reason = models.TextField(
        max_length=LONG_TEXT,
        blank=True,
        default="",
        help_text="Set when the annotator skipped the run for now (it goes to the queue's end).",
    )
    flagged = models.BooleanField(
        default=False, help_text="The annotator asks for a discussion of this run, even if the two codings agree."
    )
    flag_note = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    codebook = models.ForeignKey(
        Codebook,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The codebook version of its last submission (set at submit): agreement is per version.",
    )
    recode_reason = models.TextField(
        blank=True, default="", help_text="Set when a codebook move made this coding ambiguous: code the run again."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    hints_seen_at = models.DateTimeField(
        null=True, blank=True, help_text="When the annotator first showed the run's hints on the coding page."
    )
    hints_seen = models.JSONField(
        default=list, blank=True, help_text="The hits shown then: [{detector, modes, position, detector_version}]."
    )

    class Meta:
        ordering = ["assignment"]

    def __str__(self) -> str:
        return f"annotation of {self.assignment}"

    @property
    def is_submitted(self) -> bool:
        return self.status == self.Status.SUBMITTED


# What an annotator records for each instance (episode) of a failure mode picked (the Label fields
# beside its code); the audit trail, the API and the exports all list these. nearest_rejected is a
# code, by key.
LABEL_FIELDS = (
    "instance",
    "rationale",
    "realized_consequence",
    "evidence",
    "contrast",
    "spans",
    "nearest_rejected",
    "rejection_reason",
    "episode_id",
    "comparative_role",
)


MAX_INSTANCES = 50  # episodes of one mode in one run; the study's records have a handful


class LabelFields(models.Model):
    """What the study records for one failure mode, on an annotator's label and on a final label alike."""

    rationale = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    realized_consequence = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    evidence = models.JSONField(default=list, blank=True, help_text="Anchors in the concurrent run (file:line).")
    contrast = models.JSONField(default=list, blank=True, help_text="Anchors in the sequential twin (file:line).")
    # A span of an event's text cited as evidence or contrast, as Label Studio's span highlighting keeps it:
    # {"field": "evidence"|"contrast", "anchor", "agent", "seq", "start", "end", "quote"}; start/end count the
    # characters (code points) of the event's text, quote is text[start:end]. Its anchor is also in the field.
    spans = models.JSONField(default=list, blank=True, help_text="Cited spans of events' texts (docs/annotation.md).")
    nearest_rejected = models.ForeignKey(Code, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    rejection_reason = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    episode_id = models.CharField(max_length=200, blank=True, default="", help_text="The study's episode id.")
    comparative_role = models.CharField(
        max_length=200, blank=True, default="", help_text="e.g. parallel_adverse_but_not_outcome_differential"
    )
    # One row is one *instance* of its mode: an episode. A run that shows a mode in several episodes
    # has several rows for that code, numbered 1, 2, … (docs/agreement.md: Table 3 counts these).
    instance = models.PositiveSmallIntegerField(default=1, help_text="Episode of this mode in the run: 1, 2, …")

    class Meta:
        abstract = True

    @property
    def spans_json(self) -> str:
        """The cited spans as the coding form carries them (a hidden field)."""
        return json.dumps(self.spans, ensure_ascii=False) if self.spans else ""

    def content(self) -> dict:
        """The LABEL_FIELDS values, nearest_rejected by key (select_related it)."""
        values = {name: getattr(self, name) for name in LABEL_FIELDS}
        values["nearest_rejected"] = self.nearest_rejected.key if self.nearest_rejected else None
        return values


class Label(LabelFields):
    """One failure mode picked by an annotator, with what the study recorded for it."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="labels")
    code = models.ForeignKey(Code, on_delete=models.PROTECT, related_name="labels")

    class Meta:
        ordering = ["annotation", "code__position", "instance"]
        constraints = [
            models.UniqueConstraint(fields=["annotation", "code", "instance"], name="label_instance_once"),
            models.CheckConstraint(condition=Q(instance__gte=1), name="label_instance_from_one"),
        ]

    def __str__(self) -> str:
        return f"{self.code} on {self.annotation}"


class AuditEntry(models.Model):
    """Append-only history of every change to an annotation (who, when, before, after)."""

    # Nothing deletes history: an annotation (and so its study, its run, its annotator) with audit
    # entries cannot be deleted, and on PostgreSQL a trigger refuses UPDATE and DELETE on this table
    # (migration 0005).
    annotation = models.ForeignKey(Annotation, on_delete=models.PROTECT, related_name="history")
    actor = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    action = models.CharField(max_length=20)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["annotation", "at", "pk"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_id} at {self.at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("audit entries are append-only")


class FinalCoding(models.Model):
    """The final (gold) coding of a run in a study, and how it was reached."""

    class Provenance(models.TextChoices):
        AGREED = "agreed"
        CONSENSUS = "consensus"
        ADJUDICATED = "adjudicated"
        IMPORTED = "imported", "imported (published labels)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="finals")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="finals")
    provenance = models.CharField(max_length=11, choices=Provenance.choices)
    no_failure = models.BooleanField(default=False)
    note = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    decided_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "run"], name="final_once_per_run")]

    def __str__(self) -> str:
        return f"final for run {self.run_id} ({self.provenance})"


class FinalLabel(LabelFields):
    """A final failure mode of a run, with every field the annotators (or the study's record)
    gave it, and who decided it and how (the label's own provenance)."""

    final = models.ForeignKey(FinalCoding, on_delete=models.CASCADE, related_name="labels")
    code = models.ForeignKey(Code, on_delete=models.PROTECT, related_name="final_labels")
    provenance = models.CharField(max_length=11, blank=True, default="", help_text="As FinalCoding.provenance.")
    decided_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    count_agreed = models.BooleanField(
        default=True,
        help_text="False: an episode beyond the count every coder gave — kept from a final coding made before "
        "episode counts were compared (migration 0020); Table 3 does not count it.",
    )

    class Meta:
        ordering = ["final", "code__position", "instance"]
        constraints = [
            models.UniqueConstraint(fields=["final", "code", "instance"], name="final_label_instance_once"),
            models.CheckConstraint(condition=Q(instance__gte=1), name="final_label_instance_from_one"),
        ]

    def __str__(self) -> str:
        return f"{self.code} in {self.final}"


class PilotRound(models.Model):
    """Open coding on a pilot sample before the codebook is fixed."""

    name = models.CharField(max_length=200, unique=True)
    runs = models.ManyToManyField(Run, related_name="pilot_rounds")
    annotators = models.ManyToManyField(User, related_name="pilot_rounds")
    base_codebook = models.ForeignKey(
        Codebook,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Promoted codes are added to a new draft version of this codebook.",
    )
    result_codebook = models.ForeignKey(
        Codebook,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The draft version the codes were promoted into.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class OpenCode(models.Model):
    """A free-text code an annotator wrote on a pilot run; `promoted_to` keeps the mapping."""

    pilot = models.ForeignKey(PilotRound, on_delete=models.CASCADE, related_name="open_codes")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    annotator = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    text = models.CharField(max_length=200)
    memo = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    promoted_to = models.ForeignKey(Code, null=True, blank=True, on_delete=models.SET_NULL, related_name="open_codes")

    class Meta:
        ordering = ["pilot", "text"]

    def __str__(self) -> str:
        return self.text

    @property
    def group_key(self) -> str:
        return " ".join(self.text.lower().split())


class Discussion(models.Model):
    """Opened when the k submitted codings of a run disagree on the mode set (or one is flagged)."""

    class Status(models.TextChoices):
        OPEN = "open"
        CONSENSUS = "consensus", "resolved by consensus"
        ESCALATED = "escalated", "escalated to the adjudicator"
        ADJUDICATED = "adjudicated"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="discussions")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="discussions")
    status = models.CharField(max_length=11, choices=Status.choices, default=Status.OPEN)
    agreement = models.FloatField(
        help_text="Mean over the coder pairs of 1 − MASI distance between the first submissions (mode level)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    escalated_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agreement", "created_at"]
        constraints = [models.UniqueConstraint(fields=["study", "run"], name="discussion_once_per_run")]

    def __str__(self) -> str:
        return f"discussion of run {self.run_id} ({self.status})"


class Comment(models.Model):
    discussion = models.ForeignKey(Discussion, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    text = models.TextField(max_length=LONG_TEXT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["discussion", "created_at", "pk"]

    def __str__(self) -> str:
        return f"comment by {self.author_id} on {self.discussion_id}"


class AdvantageTag(models.Model):
    """RQ4: for a pair where concurrency helped, the mechanism that explains it."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="advantage_tags")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", help_text="The concurrent run.")
    mechanism = models.CharField(max_length=40, help_text="A key of the study's mechanism tags (Study.rq4_settings).")
    note = models.TextField(max_length=LONG_TEXT, blank=True, default="")
    tagged_by = models.ForeignKey(User, null=True, on_delete=models.SET_NULL, related_name="+")
    tagged_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "run"], name="advantage_tag_once_per_run")]

    def __str__(self) -> str:
        return f"{self.mechanism} on run {self.run_id}"


class PublishedRecord(models.Model):
    """One of the study's published files of a pair — its `annotation.md`, `review.json` or
    `advantage-review.json` — kept with the concurrent run it describes: the text as published, the
    path the artifact names it by, and everything it says as data (annotation/annotation_md.py,
    annotation/review_json.py). What the loader took from it (labels, finals) lives in the codings;
    this is the source, for reading and for export."""

    class Kind(models.TextChoices):
        ANNOTATION = "annotation"
        REVIEW = "review"
        ADVANTAGE_REVIEW = "advantage-review"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="published_records")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="published_records")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ANNOTATION)
    name = models.CharField(max_length=500, help_text="The file it was read from.")
    path = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Its path in the artifact (swebench_verified/django__django-10999/claude/annotation.md); "
        "empty when where it was read from did not say.",
    )
    text = models.TextField(help_text="The file as published.")
    data = DocumentJSONField(
        default=dict,
        help_text="Everything it says, in its order: an annotation.md's title, header, prose sections and "
        "failure blocks; a review's whole document.",
    )
    imported_at = models.DateTimeField(auto_now_add=True)
    imported_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["study", "run", "imported_at"]

    def __str__(self) -> str:
        return f"{self.path or self.name} for run {self.run_id}"


class SuggestionModel(models.Model):
    """A classifier of failure modes learned from a study's final labels (docs/suggestions.md), with
    everything needed to reproduce it — seed, parameters, features, the training runs and their
    label counts — its cross-validated scores and calibration, and its predictions for the study's
    runs (RunSuggestion). No fitted estimator is stored: the predictions are what is used, and the
    seed and training run ids give the same model again."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="suggestion_models")
    seed = models.IntegerField(help_text="Seeds the folds and the solver: same inputs and seed, same model.")
    parameters = models.JSONField(help_text="annotation/classifier.py Params, as used.")
    features = models.JSONField(default=dict, blank=True, help_text="The feature columns, described.")
    status = models.CharField(max_length=7, choices=Status.choices, default=Status.PENDING)
    folds_done = models.PositiveSmallIntegerField(default=0, help_text="Cross-validation folds (and final fit) done.")
    folds_total = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, default="", help_text="Why training failed, if it did.")
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="How long training took in the worker.")
    training_run_ids = models.JSONField(default=list, blank=True, help_text="The runs with final labels trained on.")
    label_counts = models.JSONField(default=dict, blank=True, help_text="Mode key → training runs with it.")
    modes = models.JSONField(default=list, blank=True, help_text="The modes trained (keys).")
    skipped = models.JSONField(default=list, blank=True, help_text="[{key, positives, reason}]: modes not trained.")
    folds = models.JSONField(default=list, blank=True, help_text="The test side of each fold, as run ids.")
    scores = models.JSONField(default=list, blank=True, help_text="Per mode: precision, recall, F1, support.")
    summary = models.JSONField(default=dict, blank=True, help_text="Micro and macro F1, runs, tasks.")
    calibration = models.JSONField(default=list, blank=True, help_text="[{low, high, predicted, observed, count}].")

    class Meta:
        ordering = ["study", "-created_at", "-pk"]
        indexes = [models.Index(fields=["study", "status", "-created_at"], name="suggestion_model_study")]

    def __str__(self) -> str:
        return f"suggestions #{self.pk} of {self.study} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def threshold(self) -> float:
        return float(self.parameters.get("threshold", 0.5))


class RunSuggestion(models.Model):
    """A model's predicted probability of each mode it was trained for, for one run of its study."""

    model = models.ForeignKey(SuggestionModel, on_delete=models.CASCADE, related_name="predictions")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    probabilities = models.JSONField(help_text="Mode key → predicted probability.")
    uncertainty = models.FloatField(help_text="Largest 1 − |2p − 1| over the modes: 1 = a coin toss.")
    in_training = models.BooleanField(
        help_text="The run's final labels were trained on (its probabilities are in-sample)."
    )

    class Meta:
        ordering = ["model", "run"]
        constraints = [models.UniqueConstraint(fields=["model", "run"], name="run_suggestion_once")]
        indexes = [models.Index(fields=["run", "model"], name="run_suggestion_run")]

    def __str__(self) -> str:
        return f"suggestion of model {self.model_id} for run {self.run_id}"
