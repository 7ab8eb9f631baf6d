"""What a study's statistics are computed from, read once (the only module of the analysis that reads
the database): the independent codings of each codebook version, the final labels, the pairs with
their outcomes and process metrics, the strata counts, the signature hits against gold, and the
study's settings. `read_inputs` returns them as plain values (`StudyInputs`) for the pure `compute`.

Every reader takes a study and runs a fixed number of queries, whatever its size."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Exists, Func, JSONField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from taxonomy.models import Code, Codebook
from trajectories.models import SignatureHit
from trajectories.selectors import twins
from trajectories.signatures import DETECTOR_MODES, DETECTOR_VERSION

from ..models import Annotation, AuditEntry, FinalCoding, FinalLabel, PublishedRecord, Study, StudyCodebookMove
from ..review_json import review_from_data
from ..study_settings import CODE_UNIVERSES
from .agreement import Coding, Taxonomy
from .reports import PROCESS_METRICS, FinalInstance, PairOutcome, Rq4Rules, RunMetrics
from .signatures import RunSignatures

PARTS = ("agreement", "versions", "table3", "pairs", "metrics", "strata", "signatures")


@dataclass(frozen=True)
class Period:
    """A codebook version a study pinned, and when: codings submitted in [start, end) were coded
    against it (None: open-ended)."""

    codebook: Codebook
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class VersionCodings:
    """The independent codings submitted against one codebook version, with its code tree."""

    codebook_id: int
    codebook: str
    version: int
    current: bool
    start: datetime | None
    end: datetime | None
    taxonomy: Taxonomy
    codings: list[Coding]


@dataclass(frozen=True)
class StudyInputs:
    """Everything the analysis of one study reads, as plain values. Parts not read (`read_inputs`'s
    `parts`) are left empty."""

    study_id: int
    seed: int
    coders_per_run: int
    kappa_universe: str
    rq4_rules: Rq4Rules
    names: dict[str, str]  # mode/subcategory/category key -> name, of the codebook the study pins
    agents: list[str]
    runs_total: int
    runs_final: int = 0  # runs with a final coding
    instances_not_agreed: int = 0  # final episodes whose count no coder agreement or ruling gave (count_agreed)
    taxonomy: Taxonomy = field(default_factory=lambda: Taxonomy({}))
    codings: list[Coding] = field(default_factory=list)  # independent codings against the pinned version
    submitted_at: dict[str, list[datetime]] = field(default_factory=dict)  # run -> its first submissions' times
    versions: list[VersionCodings] = field(default_factory=list)
    instances: list[FinalInstance] = field(default_factory=list)
    pairs: list[PairOutcome] = field(default_factory=list)
    metrics: list[RunMetrics] = field(default_factory=list)
    strata: list[dict] = field(default_factory=list)
    signature_runs: list[RunSignatures] = field(default_factory=list)
    codebook_modes: dict[str, str] = field(default_factory=dict)
    detector_modes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    detector_version: int = DETECTOR_VERSION

    @property
    def universe_label(self) -> str:
        return CODE_UNIVERSES[self.kappa_universe]


def read_inputs(study: Study, *, parts: tuple[str, ...] = PARTS) -> StudyInputs:
    """The study's inputs, each part read once: the current version's codings serve both the
    agreement and the current row of κ by version."""
    rules, _ = study.rq4()
    values: dict = {
        "study_id": study.pk,
        "seed": study.seed,
        "coders_per_run": study.coders_per_run,
        "kappa_universe": study.kappa_universe,
        "rq4_rules": rules,
        "names": dict(study.codebook.codes.values_list("key", "name")),
        "agents": sorted(set(study.runs.values_list("agent__name", flat=True))),
        "runs_total": study.runs.count(),
    }
    if "agreement" in parts or "versions" in parts:
        periods = codebook_periods(study=study)
        current = None
        versions = []
        for period in periods:
            taxonomy, codings, submitted_at = independent_codings(study=study, period=period)
            if period.end is None:
                current = (taxonomy, codings, submitted_at)
            codebook = period.codebook
            versions.append(VersionCodings(codebook.pk, codebook.name, codebook.version, period.end is None,
                                           period.start, period.end, taxonomy, codings))  # fmt: skip
        values.update(taxonomy=current[0], codings=current[1], submitted_at=current[2], versions=versions)
    if "table3" in parts:
        values["instances"] = final_instances(study=study)
        values["runs_final"] = FinalCoding.objects.filter(study=study).count()
        values["instances_not_agreed"] = FinalLabel.objects.filter(final__study=study, count_agreed=False).count()
    if "pairs" in parts or "metrics" in parts:
        pairs = study_pairs(study=study)  # read once for both
        if "pairs" in parts:
            values["pairs"] = pair_outcomes(study=study, pairs=pairs)
        if "metrics" in parts:
            values["metrics"] = pair_metrics(study=study, pairs=pairs)
    if "strata" in parts:
        values["strata"] = strata(study=study)
    if "signatures" in parts:
        values["codebook_modes"] = dict(
            Code.objects.filter(codebook_id=study.codebook_id, level=Code.Level.MODE).values_list("key", "name")
        )
        values["signature_runs"] = signature_runs(study=study, modes=values["codebook_modes"])
        values["detector_modes"] = DETECTOR_MODES
    return StudyInputs(**values)


# -- the codings --------------------------------------------------------------------------------


def codebook_periods(*, study: Study) -> list[Period]:
    """The versions the study has pinned, oldest first (one, unless it moved). One query."""
    moves = list(StudyCodebookMove.objects.filter(study=study).select_related("from_codebook", "to_codebook"))
    if not moves:
        return [Period(study.codebook, None, None)]
    periods = [Period(moves[0].from_codebook, None, moves[0].at)]
    for move, after in zip(moves, [*moves[1:], None], strict=True):
        periods.append(Period(move.to_codebook, move.at, after.at if after else None))
    return periods


def submits(study: Study, period: Period | None = None):
    """The study's submit entries in the order they happened, within one codebook period (default:
    the current version's): each annotation's first is its *independent* coding against it."""
    entries = AuditEntry.objects.filter(annotation__assignment__study=study, action="submit").order_by("at", "pk")
    if period is None:
        last = StudyCodebookMove.objects.filter(study=study).order_by("-at", "-pk").values_list("at", flat=True).first()
        return entries.filter(at__gte=last) if last is not None else entries
    if period.start is not None:
        entries = entries.filter(at__gte=period.start)
    if period.end is not None:
        entries = entries.filter(at__lt=period.end)
    return entries


class LabelCodes(Func):
    """The mode key of each label of a coding snapshot (an audit entry's `after`), as a JSON list, taken
    out by the database: the same list as [label["code"] for label in after["labels"]]."""

    output_field = JSONField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="jsonb_path_query_array(%(expressions)s, '$.labels[*].code')")

    def as_sqlite(self, compiler, connection, **extra):
        template = (
            "(SELECT json_group_array(json_extract(label.value, '$.code')) "
            "FROM json_each(%(expressions)s, '$.labels') AS label)"
        )
        return self.as_sql(compiler, connection, template=template)


def independent_codings(
    *, study: Study, period: Period | None = None
) -> tuple[Taxonomy, list[Coding], dict[str, list[datetime]]]:
    """The study's taxonomy, every *independent* coding — the label set each annotator submitted
    first (from the submit entry of the history), not later discussion revisions — of one codebook
    version (`period`; default: the version the study pins now), and the times each run's independent
    codings came in, in order. The taxonomy holds the study's code universe: every mode of the codebook, or
    (kappa_universe "observed") only the modes some independent coding used — and so, at the upper
    levels, only their subcategories and categories. Two queries."""
    codes = {c.pk: c for c in (period.codebook if period else study.codebook).codes.all()}
    modes = {}
    for code in codes.values():
        if code.level == "mode":
            sub = codes[code.parent_id]
            modes[code.key] = (sub.key, codes[sub.parent_id].key)
    # plain values (no model instances: this reads every coding of the study), and of each snapshot only
    # its labels' mode keys, taken out by the database (the snapshots' texts are most of their bytes)
    entries = (
        submits(study, period)
        .annotate(codes=LabelCodes("after"))
        .values_list(
            "annotation_id", "annotation__assignment__run_id", "annotation__assignment__annotator__username", "codes",
            "at",
        )
    )  # fmt: skip
    first: dict[int, Coding] = {}
    submitted_at: dict[str, list[datetime]] = defaultdict(list)
    for annotation_id, run_id, username, codes, at in entries:
        if annotation_id not in first:
            submitted_at[str(run_id)].append(at)  # when each independent coding of the run came in
            counts = Counter(codes or ())  # a label per episode
            first[annotation_id] = Coding(item=str(run_id), annotator=username, codes=frozenset(counts),
                                          counts=tuple(sorted(counts.items())))  # fmt: skip
    if study.kappa_universe == "observed":
        observed = {code for coding in first.values() for code in coding.codes}
        modes = {key: parents for key, parents in modes.items() if key in observed}
    return Taxonomy(modes), list(first.values()), dict(submitted_at)


# -- the final labels, the pairs, the strata ----------------------------------------------------------


def final_instances(*, study: Study) -> list[FinalInstance]:
    """Every final label of the study as a Table 3 instance (plain values: one row per label), but the
    episodes beyond the count the coders agreed on or the adjudicator ruled (count_agreed)."""
    codes = {c.pk: c for c in study.codebook.codes.all()}
    rows = FinalLabel.objects.filter(final__study=study, count_agreed=True).values_list(
        "final__run_id", "final__run__agent__name", "code_id"
    )
    out = []
    for run_id, agent, code_id in rows:
        mode = codes[code_id]
        sub = codes[mode.parent_id]
        cat = codes[sub.parent_id]
        out.append(FinalInstance(run_id=run_id, agent=agent, mode=(mode.key, mode.name),
                                 subcategory=(sub.key, sub.name), category=(cat.key, cat.name)))  # fmt: skip
    return out


_PAIR_FIELDS = (
    "pk",
    "task_id",
    "agent_id",
    "task_pass",
    "test_pass",
    "duration_s",
    "tokens",
    "agent__name",
    "task__benchmark__name",
    "task__difficulty",
    "task__external_id",
)


def study_pairs(*, study: Study, run_ids: list[int] | None = None) -> list[tuple[dict, dict]]:
    """The study's concurrent runs (or those of `run_ids`) that have a sequential twin, each with its twin: the
    outcomes and process metrics of both, as plain values (two queries, whatever the study's size); RQ1's pairs
    and RQ2's metrics are both read from them."""
    runs = study.runs.all() if run_ids is None else study.runs.filter(pk__in=run_ids)
    fields = (*_PAIR_FIELDS, *(name for name in PROCESS_METRICS if name not in _PAIR_FIELDS))
    twin_of = {(row["task_id"], row["agent_id"]): row for row in twins(runs=runs).values(*fields)}
    out = []
    for row in runs.values(*fields):
        twin = twin_of.get((row["task_id"], row["agent_id"]))
        if twin is not None:
            out.append((row, twin))
    return out


def pair_outcomes(
    *, study: Study, run_ids: list[int] | None = None, pairs: list[tuple[dict, dict]] | None = None
) -> list[PairOutcome]:
    """The study's concurrent runs (or those of `run_ids`) with their sequential twins' outcomes (from `pairs`
    when they have been read: study_pairs)."""
    if pairs is None:
        pairs = study_pairs(study=study, run_ids=run_ids)
    return [
        PairOutcome(
            agent=run["agent__name"],
            benchmark=run["task__benchmark__name"],
            task=run["task__external_id"],
            concurrent_pass=run["task_pass"],
            sequential_pass=twin["task_pass"],
            concurrent_test_pass=run["test_pass"],
            sequential_test_pass=twin["test_pass"],
            concurrent_duration=run["duration_s"],
            sequential_duration=twin["duration_s"],
            concurrent_tokens=run["tokens"],
            sequential_tokens=twin["tokens"],
            concurrent_run_id=run["pk"],
            sequential_run_id=twin["pk"],
        )
        for run, twin in pairs
    ]


def pair_metrics(*, study: Study, pairs: list[tuple[dict, dict]] | None = None) -> list[RunMetrics]:
    """RQ2's input: the process metrics of the study's concurrent runs that have a sequential twin, and of those
    twins (from `pairs` when they have been read: study_pairs)."""
    if pairs is None:
        pairs = study_pairs(study=study)
    out = []
    for run, twin in pairs:
        for side, values in (("concurrent", run), ("sequential", twin)):
            out.append(
                RunMetrics(
                    agent=run["agent__name"],
                    benchmark=run["task__benchmark__name"],
                    difficulty=run["task__difficulty"],
                    mode=side,
                    values={name: values[name] for name in PROCESS_METRICS},
                    task=run["task__external_id"],
                )
            )
    return out


def strata(*, study: Study) -> list[dict]:
    """Per agent × benchmark stratum: runs, runs with all k codings submitted, runs with final
    labels. One aggregate query."""
    submitted = (
        Annotation.objects.filter(assignment__study=study, assignment__run=OuterRef("pk"), status="submitted")
        .order_by()
        .values("assignment__run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = list(
        study.runs.annotate(
            submitted=Coalesce(Subquery(submitted), 0),
            is_final=Exists(FinalCoding.objects.filter(study=study, run=OuterRef("pk"))),
        )
        .values("agent__name", "task__benchmark__name")
        .annotate(
            runs=Count("pk"),
            coded_by_all=Count("pk", filter=Q(submitted__gte=study.coders_per_run)),
            final=Count("pk", filter=Q(is_final=True)),
        )
        .order_by("agent__name", "task__benchmark__name")
    )
    for row in rows:
        row["agent"], row["benchmark"] = row.pop("agent__name"), row.pop("task__benchmark__name")
    return rows


def hint_free_runs(*, study: Study) -> set[int]:
    """The runs of the study whose final labels were reached with no failure-signature hint seen: the gold
    against which the detectors and the suggestions model are measured without incorporation bias (the
    hints are the detectors' hits, and a label made after seeing them is not independent of them).

    A run with no hit had nothing to show. A run with hits is hint-free when its labels are the study's
    published ones (imported); agreed, and no coder showed the hints before their own first submission; or
    resolved by consensus, and no coder showed them before the consensus. Adjudicated runs with hits are not:
    the adjudication page shows the adjudicator the hits. Three queries."""
    finals = {
        run_id: (provenance, decided_at)
        for run_id, provenance, decided_at in FinalCoding.objects.filter(study=study).values_list(
            "run_id", "provenance", "decided_at"
        )
    }
    with_hits = set(SignatureHit.objects.filter(run_id__in=list(finals)).values_list("run_id", flat=True).distinct())
    return _hint_free(study, finals, with_hits)


def _hint_free(study: Study, finals: dict[int, tuple[str, datetime]], with_hits: set[int]) -> set[int]:
    """hint_free_runs, from the study's final codings (run -> provenance, decided at) and the runs with
    hits. One query: every coding of those runs whose annotator showed the hints, with its first submission."""
    first_submit = AuditEntry.objects.filter(annotation=OuterRef("pk"), action="submit").order_by("at").values("at")[:1]
    seen = (
        Annotation.objects.filter(
            assignment__study=study, assignment__run_id__in=with_hits, hints_seen_at__isnull=False
        )
        .annotate(first_submit=Subquery(first_submit))
        .values_list("assignment__run_id", "hints_seen_at", "first_submit")
    )
    exposed = {run for run in with_hits if finals[run][0] == FinalCoding.Provenance.ADJUDICATED}
    for run_id, shown_at, submitted in seen if with_hits else ():
        provenance, decided_at = finals[run_id]
        # the moment this coder's labels could no longer change: their first submission (agreed) or the
        # consensus; published labels were never shown anything
        settled = {FinalCoding.Provenance.AGREED: submitted, FinalCoding.Provenance.CONSENSUS: decided_at}
        if provenance in settled and (settled[provenance] is None or shown_at < settled[provenance]):
            exposed.add(run_id)
    return set(finals) - exposed


def signature_runs(*, study: Study, modes: dict[str, str] | None = None) -> list[RunSignatures]:
    """Every run of the study with gold — a final coding, or the study's published review of it — with
    its gold mode keys, the modes its review explicitly rejects, its stored hits, whether they were
    computed by the current detectors (DETECTOR_VERSION), and whether its gold was reached with no hint
    seen (hint_free_runs; a published review saw none). Five queries (six without `modes`, the study
    codebook's mode keys and names).

    Where the run's published `review.json` decides a mode, its decision is the gold for that mode
    (retained: positive; rejected: an explicit negative), whatever the final labels say; the modes it
    does not decide come from the final labels (docs/signatures.md, *Measured against gold labels*)."""
    finals = FinalCoding.objects.filter(study=study)
    coded = list(finals.values_list("run_id", "run__signatures_version", "provenance", "decided_at"))
    decided = {run_id: (provenance, at) for run_id, _, provenance, at in coded}
    versions = {run_id: version for run_id, version, _, _ in coded}
    gold: dict[int, set[str]] = defaultdict(set)
    for run_id, key in FinalLabel.objects.filter(final__study=study).values_list("final__run_id", "code__key"):
        gold[run_id].add(key)
    reviews = published_decisions(study=study, modes=modes, versions=versions)
    run_ids = sorted(set(decided) | set(reviews))
    hits: dict[int, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    reviewed = PublishedRecord.objects.filter(study=study, kind=PublishedRecord.Kind.REVIEW).values("run_id")
    rows = SignatureHit.objects.filter(Q(run_id__in=finals.values("run_id")) | Q(run_id__in=reviewed))
    for run_id, detector, listed in rows.values_list("run_id", "detector", "modes").order_by("run_id", "position"):
        hits[run_id].append((detector, tuple(listed or ())))
    with_hits = {run_id for run_id, found in hits.items() if found and run_id in decided}
    free = _hint_free(study, decided, with_hits) | set(reviews)  # published decisions saw no hint
    out = []
    for run_id in run_ids:
        labels = frozenset(gold.get(run_id, ()))
        retained, rejected = reviews.get(run_id, (frozenset(), frozenset()))
        out.append(
            RunSignatures(
                run_id=run_id,
                gold=(labels - rejected) | retained,
                hits=tuple(hits.get(run_id, ())),
                checked=versions.get(run_id) == DETECTOR_VERSION,
                hint_free=run_id in free,
                rejected=rejected - retained,
                reviewed=run_id in reviews,
            )
        )
    return out


def published_decisions(
    *, study: Study, modes: dict[str, str] | None = None, versions: dict[int, int | None] | None = None
) -> dict[int, tuple[frozenset[str], frozenset[str]]]:
    """The study's published reviews (`review.json`, kept as PublishedRecord data) as gold: per run, the
    mode keys its candidate decisions retain and those they reject, matched to the study's codebook
    (`modes`: its mode keys and names; read when not given) by name. A run's newest review counts; a
    decided label the codebook does not have decides nothing (the import reported it). `versions`, when
    given, gets each reviewed run's signatures version. One query (two without `modes`)."""
    if modes is None:
        modes = dict(
            Code.objects.filter(codebook_id=study.codebook_id, level=Code.Level.MODE).values_list("key", "name")
        )
    keys = {name.lower(): key for key, name in modes.items()}
    records = PublishedRecord.objects.filter(study=study, kind=PublishedRecord.Kind.REVIEW).order_by(
        "imported_at", "pk"
    )
    documents = {}
    for run_id, version, data in records.values_list("run_id", "run__signatures_version", "data"):
        documents[run_id] = data  # the newest wins
        if versions is not None:
            versions[run_id] = version
    found = {}
    for run_id, data in documents.items():
        review = review_from_data(data, name=f"review of run {run_id}")  # checked when it was imported
        retained = frozenset(keys[c.third_label.lower()] for c in review.retained if c.third_label.lower() in keys)
        rejected = frozenset(keys[c.third_label.lower()] for c in review.rejected if c.third_label.lower() in keys)
        found[run_id] = (retained, rejected)
    return found
