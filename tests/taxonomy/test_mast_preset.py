"""The MAST taxonomy as a shipped codebook: `load_codebook --preset mast` (docs/annotation.md)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from taxonomy.models import Codebook, FrozenCodebookError
from taxonomy.services import code_update, codebook_load_default, codebook_load_preset
from taxonomy.tree import TreeError

pytestmark = pytest.mark.django_db

# Cemri et al., "Why Do Multi-Agent LLM Systems Fail?" (arXiv:2503.13657v3), Appendix A: the 14 modes by category.
PAPER = {
    "System Design Issues": [
        "1.1 Disobey task specification",
        "1.2 Disobey role specification",
        "1.3 Step repetition",
        "1.4 Loss of conversation history",
        "1.5 Unaware of termination conditions",
    ],
    "Inter-Agent Misalignment": [
        "2.1 Conversation reset",
        "2.2 Fail to ask for clarification",
        "2.3 Task derailment",
        "2.4 Information withholding",
        "2.5 Ignored other agent’s input",
        "2.6 Reasoning-action mismatch",
    ],
    "Task Verification": [
        "3.1 Premature termination",
        "3.2 No or incomplete verification",
        "3.3 Incorrect verification",
    ],
}


def test_the_command_loads_mast_beside_the_study_codebook_frozen_and_cited():
    study_codebook = codebook_load_default()
    out = StringIO()
    call_command("load_codebook", "--preset", "mast", stdout=out)
    assert "MAST" in out.getvalue() and "3 categories, 3 subcategories, 14 modes" in out.getvalue()
    mast = Codebook.objects.get(name="MAST")
    assert mast.is_frozen and mast.pk != study_codebook.pk
    assert Codebook.objects.count() == 2  # side by side: the study's codebook is untouched
    modes = mast.codes.filter(level="mode").select_related("parent__parent").order_by("position")
    by_category: dict[str, list[str]] = {}
    for mode in modes:
        # two levels in three: each category holds one subcategory of its own name, which holds the modes
        assert mode.parent.name == mode.parent.parent.name
        by_category.setdefault(mode.parent.parent.name, []).append(mode.name)
    assert by_category == PAPER
    assert all(m.definition and "arXiv:2503.13657" in m.source for m in modes)
    fm_2_4 = mast.codes.get(key="fm-2-4")
    assert fm_2_4.definition.startswith("Failure to share or communicate important data or insights")
    # loading again changes nothing
    call_command("load_codebook", "--preset", "mast", stdout=StringIO())
    assert codebook_load_preset(preset="mast").pk == mast.pk and Codebook.objects.count() == 2


def test_an_unknown_preset_is_refused_and_stores_nothing():
    with pytest.raises(CommandError, match="invalid choice: 'nope'"):
        call_command("load_codebook", "--preset", "nope", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(TreeError, match="unknown preset 'nope'; one of study, mast"):
        codebook_load_preset(preset="nope")
    with pytest.raises(CommandError):
        call_command("load_codebook", "--preset", "mast", "--csv", "x.csv", stdout=StringIO(), stderr=StringIO())
    assert not Codebook.objects.exists()


def test_nobody_edits_the_shipped_mast_codebook():
    mast = codebook_load_preset(preset="mast")
    code = mast.codes.get(key="fm-1-1")
    with pytest.raises(FrozenCodebookError):
        code_update(code=code, definition="ours now")
    assert mast.codes.get(key="fm-1-1").definition.startswith("Failure to adhere to the specified constraints")
