"""The study's published files read as data (annotation_md.py, review_json.py, published_files.py): the
three real pairs of one task folder of the artifact, and bad input. What each test expects is read from
the files themselves with plain string and JSON handling, not from the parsers under test."""

from __future__ import annotations

import json
import re

import pytest

from annotation.annotation_md import PublishedFormatError, failures_of, parse_annotation_md, render_annotation_md
from annotation.published_files import cell_pair_folder, kind_of, pair_folder, read_pair, safe_relative
from annotation.review_json import ReviewFormatError, parse_advantage_review, parse_review, serialize_review
from tests.factories import REAL

AGENTS = ("claude", "codex", "kimi")
TASK = "swebench_verified/django__django-10999"
KEY_LINE = re.compile(r"^([a-z_][a-z0-9_]*): (.*)$")


@pytest.fixture
def pair_dir(artifact_root):
    return lambda agent: artifact_root / TASK / agent


def _key_lines(lines: list[str]) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(KEY_LINE.match, lines) if m]


@pytest.mark.parametrize("agent", AGENTS)
def test_annotation_md_keeps_every_field_in_order(pair_dir, agent):
    text = (pair_dir(agent) / "annotation.md").read_text(encoding="utf-8")
    head, _, rest = text.partition("\n\n# ")
    prose, *blocks = ("# " + rest).split("\n## Failure ")
    record = parse_annotation_md(text, name=f"{agent}/annotation.md")
    assert list(record.header.items()) == _key_lines(head.splitlines())
    assert record.header["verdict"] == dict(_key_lines(head.splitlines()))["verdict"]
    comparative = _key_lines(prose.splitlines())
    assert [key for key, _ in comparative] == ["parallel_anchor", "serial_anchor", "causal_scope"]
    assert list(record.comparative.items()) == comparative
    assert [s.heading for s in record.sections] == [line for line in prose.splitlines() if line.startswith("#")]
    assert record.sections[-1].prose == prose.split("## Task-Solving Difference\n")[1].split("\n\n")[0]
    assert [list(f.fields.items()) for f in record.failures] == [_key_lines(b.splitlines()[1:]) for b in blocks]
    assert [f.number for f in record.failures] == list(range(1, len(blocks) + 1))


@pytest.mark.parametrize("agent", AGENTS)
def test_annotation_md_is_written_back_byte_for_byte_from_its_data(pair_dir, agent):
    raw = (pair_dir(agent) / "annotation.md").read_bytes()
    data = json.loads(json.dumps(parse_annotation_md(raw.decode("utf-8")).data()))  # as stored: JSON
    assert render_annotation_md(data=data, failures=failures_of(data)).encode("utf-8") == raw
    # and without its failure blocks, the header and prose as published, up to the first block
    assert (
        render_annotation_md(data=data, failures=[]).encode("utf-8")
        == raw.split(b"\n\n## Failure 1\n")[0].rstrip(b"\n") + b"\n"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_review_json_keeps_every_decision_anchor_and_reason(pair_dir, agent):
    raw = (pair_dir(agent) / "review.json").read_bytes()
    document = json.loads(raw)
    review = parse_review(raw.decode("utf-8"), name=f"{agent}/review.json")
    assert review.document == document and (review.pair_id, review.task_id) == (
        document["pair_id"],
        "django__django-10999",
    )
    expected = [(g["top_label"], g["sub_label"], c) for g in document["taxonomy_decisions"] for c in g["candidates"]]
    assert len(review.candidates) == len(expected) == 32
    for candidate, (top, sub, published) in zip(review.candidates, expected, strict=True):
        assert (candidate.top_label, candidate.sub_label, candidate.third_label) == (top, sub, published["third_label"])
        assert (candidate.decision, candidate.reason) == (published["decision"], published["reason"])
        for key in ("parallel_evidence", "serial_contrast"):
            assert [(a.path, a.line) for a in getattr(candidate, key)] == [
                (a["path"], a["line"]) for a in published[key]
            ]
        for key in ("realized_consequence", "nearest_rejected_label", "near_match_reason", "episode_id"):
            assert getattr(candidate, key) == (published[key] or "")
    assert review.anchor_count == sum(len(c["parallel_evidence"]) + len(c["serial_contrast"]) for *_, c in expected)
    assert len(review.patterns) == len(document["retained_patterns"])
    for pattern, published in zip(review.patterns, document["retained_patterns"], strict=True):
        assert [a.text for a in pattern.parallel_evidence] == [
            f"{a['path']}:{a['line']}" for a in published["parallel_evidence"]
        ]
        assert [a.text for a in pattern.serial_contrast] == [
            f"{a['path']}:{a['line']}" for a in published["serial_contrast"]
        ]
        assert (pattern.near_match_reason, pattern.comparative_role) == (
            published["near_match_reason"],
            published["comparative_role"],
        )
    assert {p.third_label for p in review.patterns} == {c.third_label for c in review.retained}
    assert serialize_review(review.document).encode("utf-8") == raw


def test_the_claude_review_keeps_all_anchors_of_its_fan_out_pattern(pair_dir):
    """annotation.md cites one evidence and one contrast anchor for Fan-out Budget Exhaustion; review.json
    has all of them."""
    document = json.loads((pair_dir("claude") / "review.json").read_bytes())
    [published] = [p for p in document["retained_patterns"] if p["third_label"] == "Fan-out Budget Exhaustion"]
    review = parse_review(json.dumps(document))
    [pattern] = [p for p in review.patterns if p.third_label == "Fan-out Budget Exhaustion"]
    assert (len(pattern.parallel_evidence), len(pattern.serial_contrast)) == (
        len(published["parallel_evidence"]),
        len(published["serial_contrast"]),
    )
    assert len(pattern.parallel_evidence) > 1 and len(pattern.serial_contrast) > 1
    record = parse_annotation_md((pair_dir("claude") / "annotation.md").read_text(encoding="utf-8"))
    [failure] = [f for f in record.failures if f.labels[2] == "Fan-out Budget Exhaustion"]
    assert len(failure.anchors("parallel_evidence")) < len(pattern.parallel_evidence)


def test_a_pair_read_from_the_artifact_knows_its_paths(pair_dir):
    pair = read_pair(pair_dir("kimi") / "annotation.md")
    assert pair.path == f"{TASK}/kimi/annotation.md" and pair.benchmark_hint == "swebench_verified"
    assert [(r.kind, r.path) for r in pair.reviews] == [("review", f"{TASK}/kimi/review.json")]
    assert pair.reviews[0].text.encode("utf-8") == (pair_dir("kimi") / "review.json").read_bytes()


def _claude_review(pair_dir) -> dict:
    return json.loads((pair_dir("claude") / "review.json").read_bytes())


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (
            lambda d: d["taxonomy_decisions"][5]["candidates"][1].update(decision="maybe"),
            re.escape("field 'taxonomy_decisions[5].candidates[1].decision': expected retain or reject, got 'maybe'"),
        ),
        (
            lambda d: d["taxonomy_decisions"][2]["candidates"][1]["parallel_evidence"][0].update(line="14"),
            r"field 'taxonomy_decisions\[2\].candidates\[1\].parallel_evidence\[0\].line': expected a line number",
        ),
        (
            lambda d: d["taxonomy_decisions"][2]["candidates"][1]["serial_contrast"][0].pop("path"),
            r"field 'taxonomy_decisions\[2\].candidates\[1\].serial_contrast\[0\].path': missing",
        ),
        (
            lambda d: d["taxonomy_decisions"][0].update(candidates={}),
            r"field 'taxonomy_decisions\[0\].candidates': expected a list, got an object",
        ),
        (
            lambda d: d["taxonomy_decisions"][0]["candidates"][0].update(reason=3),
            r"field 'taxonomy_decisions\[0\].candidates\[0\].reason': expected text, got int",
        ),
        (
            lambda d: d["taxonomy_decisions"][0]["candidates"][0].update(third_label=""),
            r"field 'taxonomy_decisions\[0\].candidates\[0\].third_label': empty",
        ),
        (
            lambda d: d["retained_patterns"][0].update(third_label="Lossy Handoff"),
            r"field 'retained_patterns\[0\].third_label': 'Lossy Handoff' is not retained in taxonomy_decisions",
        ),
        (
            lambda d: d["retained_patterns"].pop(),
            r"field 'retained_patterns': no pattern for the retained Artifact Leakage",
        ),
        (
            lambda d: d["retained_patterns"][0]["serial_contrast"].append("serial/cell/model.patch:3"),
            r"field 'retained_patterns\[0\].serial_contrast\[3\]': expected an object, got text",
        ),
        (lambda d: d.pop("taxonomy_decisions"), r"field 'taxonomy_decisions': expected a list, got null"),
    ],
)
def test_a_bad_review_names_the_file_and_the_json_field(pair_dir, break_it, message):
    document = _claude_review(pair_dir)
    break_it(document)
    with pytest.raises(ReviewFormatError, match="^claude/review.json: " + message):
        parse_review(json.dumps(document), name="claude/review.json")


def test_a_review_that_is_no_json_object_says_so():
    with pytest.raises(ReviewFormatError, match=r"^r.json:2: not valid JSON"):
        parse_review('{"pair_id": "a",\n ]', name="r.json")
    with pytest.raises(ReviewFormatError, match="^r.json: expected a JSON object, got a list"):
        parse_review("[]", name="r.json")
    with pytest.raises(ReviewFormatError, match="field 'decision': expected text, got true/false"):
        parse_advantage_review('{"decision": true}', name="a.json")


def test_the_exact_message_of_a_bad_decision(pair_dir):
    document = _claude_review(pair_dir)
    document["taxonomy_decisions"][0]["candidates"][1]["decision"] = "keep"
    with pytest.raises(ReviewFormatError) as caught:
        parse_review(json.dumps(document), name="claude/review.json")
    assert str(caught.value) == (
        "claude/review.json: field 'taxonomy_decisions[0].candidates[1].decision': expected retain or reject, "
        "got 'keep'"
    )


def test_a_line_that_is_no_field_in_a_failure_block_is_refused_by_line():
    text = (REAL / "paper-annotations" / "nl2repo__dictdatabase__codex" / "annotation.md").read_text()
    broken = text.replace("\nrejection_reason:", "\n\nA stray sentence.\nrejection_reason:")
    line = broken.splitlines().index("A stray sentence.") + 1
    with pytest.raises(PublishedFormatError, match=rf"^x.md:{line}: Failure 1 holds a line that is no `key: value`"):
        parse_annotation_md(broken, name="x.md")
    with pytest.raises(PublishedFormatError, match=r"^x.md:3: the header holds a line"):
        parse_annotation_md("pair_id: a/codex\n\nnot a field\n", name="x.md")


def test_prose_lines_are_kept_as_written_with_their_fields():
    text = (
        "# t / codex\n\npair_id: t/codex\n\n# Notes\n\nfirst line\n  indented prose\nkey_one: `a.py:1`\n\n"
        "## More\ntail\n"
    )
    record = parse_annotation_md(text)
    assert record.title == "# t / codex" and record.comparative == {"key_one": "`a.py:1`"}
    assert record.sections[0].lines == ["", "first line", "  indented prose", ["key_one", "`a.py:1`"]]
    data = json.loads(json.dumps(record.data()))
    assert render_annotation_md(data=data, failures=failures_of(data)) == text


def test_where_a_pairs_files_sit():
    assert (
        pair_folder(
            ("/", "x", "swebench_verified", "django__django-10999", "claude"),
            task_id="django__django-10999",
            agent="claude",
        )
        == "swebench_verified/django__django-10999/claude"
    )
    assert pair_folder(("r", "nl2repo__dictdatabase__codex"), task_id="dictdatabase", agent="codex") == (
        "nl2repo/dictdatabase/codex"
    )
    assert pair_folder(
        ("r", "swebench_verified__django__django-1__kimi"), task_id="django__django-1", agent="kimi"
    ) == ("swebench_verified/django__django-1/kimi")
    assert pair_folder(("records", "claude"), task_id="django__django-1", agent="claude") == ""
    assert cell_pair_folder(
        "swebench_verified/django__django-10999/claude/parallel", task_id="django__django-10999"
    ) == ("swebench_verified/django__django-10999/claude")
    assert cell_pair_folder("claude/parallel", task_id="django__django-10999") == ""
    assert cell_pair_folder("d/concurrent.jsonl", task_id="d") == ""
    assert [kind_of(n) for n in ("a/review.json", "advantage-review.json", "x/annotation.md")] == [
        "review",
        "advantage-review",
        "annotation",
    ]
    for bad in ("../x", "/etc/x", ""):
        with pytest.raises(ValueError, match="not a relative path"):
            safe_relative(bad)
