"""Reading the annotate form: a checkbox per mode; each instance (episode) of a picked mode has its
fields suffixed with the mode id, and with the instance number from the second on
(`rationale-7`, `rationale-7-2`); `instance-7` lists the instances on the form (default: one).
The adjudication form names its fields the same way, one set per ruled mode (`rationale-7`)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

from django import forms
from django.http import QueryDict

from .analysis.reports import Rq4Rules
from .errors import AnnotationError
from .hint_policies import DEFAULT_HINT_POLICY, HINT_POLICIES
from .models import MAX_INSTANCES
from .services.coding import LabelInput, field_key
from .services.review import Ruling
from .study_settings import CODE_UNIVERSES, SettingsError, format_mechanisms, parse_mechanisms, rq4_rules

HINT_POLICY_HELP = (
    "When annotators see the failure-signature hints of a run: after their first submission of it keeps the "
    "independent coding (what agreement is computed on) free of them. The adjudicator always sees them."
)


ID_MAX = 2**63 - 1  # the largest id or count a database column holds


def _int(value: str | None, field: str) -> int:
    try:
        number = int(value or "")
    except ValueError as exc:
        raise AnnotationError(f"{field} must be a whole number", {field: "not a number"}) from exc
    if not -ID_MAX <= number <= ID_MAX:
        raise AnnotationError(f"{field} is out of range", {field: "out of range"})
    return number


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",\n", "\n").splitlines() if line.strip()]


def _spans(text: str, field: str) -> list:
    """The cited spans of one episode: a JSON list (services/spans.py checks each at save)."""
    if not text.strip():
        return []
    try:
        spans = json.loads(text)
    except ValueError as exc:
        raise AnnotationError(f"{field}: not JSON ({exc})", {field: "not JSON"}) from exc
    if not isinstance(spans, list):
        raise AnnotationError(f"{field}: expected a list of spans", {field: "not a list"})
    return spans


def _instance(data: QueryDict, code_id: int, k: int) -> LabelInput:
    def value(name: str) -> str:
        return data.get(field_key(name, code_id, k), "")

    rejected = value("rejected")
    return LabelInput(
        code_id=code_id,
        rationale=value("rationale"),
        realized_consequence=value("consequence"),
        evidence=_lines(value("evidence")),
        contrast=_lines(value("contrast")),
        spans=_spans(value("spans"), field_key("spans", code_id, k)),
        nearest_rejected_id=_int(rejected, field_key("rejected", code_id, k)) if rejected else None,
        rejection_reason=value("rejection"),
        episode_id=value("episode"),
        comparative_role=value("role"),
    )


def parse_annotation_form(data: QueryDict) -> dict:
    """The annotate form as the keyword arguments of annotation_save / annotation_revise:
    version, no_failure, notes, labels."""
    version = _int(data.get("version"), "version")
    labels = []
    for raw in dict.fromkeys(data.getlist("code")):
        code_id = _int(raw, "code")
        instances = sorted({_int(k, f"instance-{code_id}") for k in data.getlist(f"instance-{code_id}")}) or [1]
        if len(instances) > MAX_INSTANCES or any(not 1 <= k <= MAX_INSTANCES for k in instances):
            raise AnnotationError(
                f"instance-{code_id}: at most {MAX_INSTANCES} episodes of one mode, numbered from 1",
                {f"instance-{code_id}": "out of range"},
            )
        labels.extend(_instance(data, code_id, k) for k in instances)
    return {
        "version": version,
        "no_failure": data.get("no_failure") in ("on", "true", "1"),
        "notes": data.get("notes", ""),
        # The flag's note is always on a form that has the flag; without it the flag is left as it is.
        "flagged": data.get("flagged") in ("on", "true", "1") if "flag_note" in data else None,
        "flag_note": data.get("flag_note"),
        "labels": labels,
    }


RULING_INPUTS = ("episodes", "rationale", "consequence", "evidence", "contrast")  # the ruling form's fields per mode


def parse_ruling_form(data: QueryDict) -> dict:
    """The adjudication form as the keyword arguments of review.adjudicate: rulings, no_failure, note."""
    rulings = []
    for raw in dict.fromkeys(data.getlist("code")):
        code_id = _int(raw, "code")
        rulings.append(
            Ruling(
                code_id=code_id,
                rationale=data.get(f"rationale-{code_id}", ""),
                realized_consequence=data.get(f"consequence-{code_id}", ""),
                evidence=_lines(data.get(f"evidence-{code_id}", "")),
                contrast=_lines(data.get(f"contrast-{code_id}", "")),
                episodes=_int(episodes, f"episodes-{code_id}")
                if (episodes := data.get(f"episodes-{code_id}", "").strip())
                else None,
            )
        )
    return {"rulings": rulings, "no_failure": data.get("no_failure") == "on", "note": data.get("note", "")}


# -- designing a study on the web ------------------------------------------------------------


class RunFilterForm(forms.Form):
    """Which runs: any of the agents, benchmarks and difficulties ticked (none ticked: all), and/or
    run ids pasted from a list (a saved selection, e.g. a column of the run list's export)."""

    agent = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    benchmark = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    difficulty = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    run_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Run ids",
        help_text="Optional: run ids separated by spaces, commas or lines; only these (within the ticked filters).",
    )

    def __init__(self, *args, choices: dict[str, list[str]], **kwargs):
        super().__init__(*args, **kwargs)
        for name, values in choices.items():
            self.fields[name].choices = [(v, v or "(none)") for v in values]

    def clean_run_ids(self) -> list[int] | None:
        text = self.cleaned_data["run_ids"].replace(",", " ").split()
        if not text:
            return None
        bad = [t for t in text if not t.isdigit()]
        if bad:
            raise forms.ValidationError(f"not a run id: {', '.join(bad[:5])}")
        return sorted({int(t) for t in text})

    def filters(self) -> dict[str, list[str]]:
        return {name: self.cleaned_data[name] for name in ("agent", "benchmark", "difficulty")}


class StudyForm(RunFilterForm):
    name = forms.CharField(max_length=200)
    codebook = forms.ModelChoiceField(queryset=None, help_text="A frozen version: the study pins it.")
    annotators = forms.ModelMultipleChoiceField(queryset=None, widget=forms.CheckboxSelectMultiple)
    adjudicator = forms.ModelChoiceField(queryset=None, help_text="The senior author who rules on disagreements.")
    coders_per_run = forms.IntegerField(min_value=2, max_value=50, initial=2, label="Coders per run (k)")
    seed = forms.IntegerField(initial=0, min_value=-(2**31), max_value=2**31 - 1,
                              help_text="Makes the assignment and the queue orders reproducible.")  # fmt: skip
    # Not required: left out (a script's form), the study gets the default.
    hint_policy = forms.ChoiceField(choices=list(HINT_POLICIES.items()), initial=DEFAULT_HINT_POLICY, required=False,
                                    label="Annotators see hints", help_text=HINT_POLICY_HELP)  # fmt: skip
    assign_now = forms.BooleanField(required=False, initial=True, label="Assign the runs now")
    field_order = ["name", "codebook", "annotators", "adjudicator", "coders_per_run", "seed", "hint_policy"]

    def __init__(self, *args, codebooks, annotators, adjudicators, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["codebook"].queryset = codebooks
        self.fields["annotators"].queryset = annotators
        self.fields["adjudicator"].queryset = adjudicators

    def clean_hint_policy(self) -> str:
        return self.cleaned_data["hint_policy"] or DEFAULT_HINT_POLICY


class StudyEditForm(forms.Form):
    name = forms.CharField(max_length=200)
    adjudicator = forms.ModelChoiceField(queryset=None)
    coders_per_run = forms.IntegerField(min_value=2, max_value=50, label="Coders per run (k)")
    seed = forms.IntegerField(min_value=-(2**31), max_value=2**31 - 1)

    def __init__(self, *args, adjudicators, assigned: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["adjudicator"].queryset = adjudicators
        if assigned:  # they decide the assignment: fixed once runs are assigned
            for name in ("coders_per_run", "seed"):
                self.fields[name].disabled = True
                self.fields[name].help_text = "Fixed: runs are assigned."


class AnnotatorChangeForm(forms.Form):
    """Replace an annotator (their unsubmitted runs move to the replacement, or to the others when
    none is named), or add one (the unstarted runs are dealt again)."""

    leaving = forms.ModelChoiceField(queryset=None, required=False, label="Annotator leaving")
    replacement = forms.ModelChoiceField(queryset=None, required=False, label="New annotator",
                                         empty_label="nobody (the others take the runs)")  # fmt: skip

    def __init__(self, *args, current, candidates, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["leaving"].queryset = current
        self.fields["replacement"].queryset = candidates


class AnalysisSettingsForm(forms.Form):
    """A study's analysis settings (annotation/study_settings.py validates them; its errors land on
    the field they name)."""

    kappa_universe = forms.ChoiceField(choices=list(CODE_UNIVERSES.items()), label="κ's code universe")
    # Not required: a form without it (an older client) leaves the policy as it is.
    hint_policy = forms.ChoiceField(choices=list(HINT_POLICIES.items()), label="Annotators see hints", required=False)
    higher_test_pass = forms.BooleanField(required=False, label="Higher test pass")
    test_pass_margin = forms.FloatField(label="by more than (test pass difference, 0–1)")
    solved_only_concurrently = forms.BooleanField(required=False, label="Solved only concurrently")
    faster = forms.BooleanField(required=False, label="Faster with no lower test pass")
    faster_min_seconds = forms.FloatField(label="at least (seconds)")
    faster_min_fraction = forms.FloatField(label="and at least (fraction of the sequential time, 0.2 = 20%)")
    mechanisms = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}), label="Mechanism tags (one per line: key: label)"
    )

    @classmethod
    def for_study(cls, study, data=None) -> AnalysisSettingsForm:
        rules, tags = study.rq4()
        initial = {"kappa_universe": study.kappa_universe, "hint_policy": study.hint_policy, **asdict(rules),
                   "mechanisms": format_mechanisms(tags)}  # fmt: skip
        return cls(data, initial=initial)

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            data["rules"] = rq4_rules({f.name: data[f.name] for f in fields(Rq4Rules)})
        except SettingsError as exc:
            self.add_error(exc.field, exc.message)
        try:
            data["tags"] = parse_mechanisms(data["mechanisms"])
        except SettingsError as exc:
            self.add_error("mechanisms", exc.message)
        return data
