"""A study coded with the MAST codebook end to end: codings, reconciliation, agreement and Table 3 work as
with the study's own codebook (docs/annotation.md, MAST's two levels in three)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from django.test import TestCase
from sklearn.metrics import cohen_kappa_score

from annotation.analysis.store import analysis_section
from annotation.errors import AnnotationError
from annotation.models import FinalCoding, Label
from taxonomy.services import codebook_load_default, codebook_load_preset
from tests.factories import assigned_study, both, client_for, code_keys

pytestmark = pytest.mark.django_db


def _code_with_mast(study) -> dict[int, dict[str, set[str]]]:
    """Runs 1–3: both coders say 1.3 Step repetition; run 4: both say 2.4 and 3.2; the rest disagree (1.3
    against 2.4). Returns what each coder picked per run."""
    picked: dict[int, dict[str, set[str]]] = {}
    for index, run in enumerate(study.runs.order_by("pk")):
        a, b = both(study, run)
        keys_a, keys_b = {
            True: (["fm-1-3"], ["fm-1-3"]),
            False: (["fm-2-4", "fm-3-2"], ["fm-2-4", "fm-3-2"]) if index == 3 else (["fm-1-3"], ["fm-2-4"]),
        }[index < 3]
        code_keys(a, keys_a)
        code_keys(b, keys_b)
        picked[run.pk] = {a.annotator.username: set(keys_a), b.annotator.username: set(keys_b)}
    return picked


def _same(ours, sklearn_kappa) -> bool:
    """Our κ is None where scikit-learn's is undefined (nan: both coders constant and equal)."""
    return ours is None if math.isnan(sklearn_kappa) else ours == pytest.approx(sklearn_kappa)


@pytest.mark.filterwarnings("ignore::UserWarning")  # scikit-learn warns on the columns where κ is undefined
def test_a_study_pinned_to_mast_is_coded_reconciled_and_reported(tmp_path, trio, adjudicator):
    codebook_load_default()  # the study's codebook is there too; this study pins MAST
    mast = codebook_load_preset(preset="mast")
    study = assigned_study(tmp_path / "mast", mast, trio, adjudicator)
    assert study.codebook_id == mast.pk
    with TestCase.captureOnCommitCallbacks(execute=True):
        picked = _code_with_mast(study)

    # agreed runs became final codings with MAST's modes
    finals = {f.run_id: {label.code.key for label in f.labels.all()} for f in FinalCoding.objects.filter(study=study)}
    agreed = {run: next(iter(c.values())) for run, c in picked.items() if len({frozenset(v) for v in c.values()}) == 1}
    assert finals == agreed

    # Table 3 from the final labels, counted here from what was coded
    table = analysis_section(study, "table3")
    expected_modes = Counter(key for keys in agreed.values() for key in keys)
    names = dict(mast.codes.values_list("key", "name"))
    category_of = {m.key: m.parent.parent for m in mast.codes.filter(level="mode").select_related("parent__parent")}
    expected_categories = Counter()
    for key, count in expected_modes.items():
        expected_categories[category_of[key].name] += count
    rows = {(r["level"], r["name"]): r["count"] for r in table["rows"]}
    assert {name: n for (level, name), n in rows.items() if level == "mode"} == {
        names[k]: n for k, n in expected_modes.items()
    }
    assert {name: n for (level, name), n in rows.items() if level == "category"} == dict(expected_categories)
    # the one subcategory of each category repeats its category's row
    assert {name: n for (level, name), n in rows.items() if level == "subcategory"} == dict(expected_categories)
    assert table["instances"] == sum(expected_modes.values()) and table["runs_with_mode"] == len(agreed)

    # agreement: each pair's κ on a mode and on its category equals scikit-learn's on the same yes/no columns
    report = analysis_section(study, "agreement")
    for pair in report["pairs"]:
        one, two = pair["annotators"]
        shared = [codes for codes in picked.values() if one in codes and two in codes]
        assert pair["levels"]["mode"]["n_shared_items"] == len(shared)
        if len(shared) < 2:
            continue
        for key in ("fm-1-3", "fm-2-4"):
            expected = cohen_kappa_score([key in c[one] for c in shared], [key in c[two] for c in shared])
            assert _same(pair["levels"]["mode"]["per_code_kappa"][key], expected)
        fc1 = [[any(category_of[k].key == "fc1" for k in c[who]) for c in shared] for who in (one, two)]
        assert _same(pair["levels"]["category"]["per_code_kappa"]["fc1"], cohen_kappa_score(*fc1))
    assert report["code_universe"]["codes"] == {"category": 3, "subcategory": 3, "mode": 14}
    assert any(pair["levels"]["mode"]["n_shared_items"] >= 2 for pair in report["pairs"])


def test_a_study_pinned_to_the_study_codebook_refuses_mast_codes(tmp_path, trio, adjudicator):
    codebook = codebook_load_default()
    mast = codebook_load_preset(preset="mast")
    study = assigned_study(tmp_path / "s", codebook, trio, adjudicator)
    a, _ = both(study)
    from annotation.selectors.queue import annotation_for
    from annotation.services.coding import LabelInput, annotation_save

    annotation = annotation_for(assignment=a)
    label = LabelInput(code_id=mast.codes.get(key="fm-1-3").pk, rationale="wrong codebook")
    with pytest.raises(AnnotationError) as refused:
        annotation_save(annotation=annotation, actor=a.annotator, version=annotation.version, no_failure=False,
                        notes="", labels=[label])  # fmt: skip
    assert "not a failure mode of this study's codebook" in str(refused.value.errors)
    assert not Label.objects.filter(annotation__assignment=a).exists()


def test_only_the_assigned_coders_see_the_mast_study_s_coding_page(tmp_path, trio, adjudicator, outsider):
    mast = codebook_load_preset(preset="mast")
    study = assigned_study(tmp_path / "m", mast, trio, adjudicator)
    a, _ = both(study)
    page = f"/annotate/{a.pk}/"
    response = client_for(a.annotator).get(page)
    assert response.status_code == 200 and "1.3 Step repetition" in response.content.decode()
    assert client_for(outsider).get(page).status_code in (403, 404)
