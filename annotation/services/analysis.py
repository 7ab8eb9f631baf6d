"""A study's analysis settings (κ's code universe; RQ4's rules and mechanism tags) and its hint
policy: one write path for the web form (and anything else that sets them)."""

from __future__ import annotations

from dataclasses import asdict

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from activity.services import record

from ..analysis.reports import Rq4Rules
from ..analysis.store import analysis_changed
from ..hint_policies import HINT_POLICIES
from ..models import AdvantageTag, Study
from ..study_settings import SettingsError, code_universe, mechanisms


@transaction.atomic
def study_analysis_update(
    *,
    study: Study,
    kappa_universe: str,
    rules: Rq4Rules,
    tags: list[tuple[str, str]],
    actor: AbstractBaseUser,
    hint_policy: str | None = None,
) -> list[str]:
    """Store the study's analysis settings, all or nothing; SettingsError names the field at fault
    (a tag still used by a tagged pair cannot be removed). A change of κ's universe or of RQ4's rules
    changes the statistics: their inputs version goes up and a refresh is queued. The hint policy
    (None: unchanged) decides when annotators see hints (docs/annotation.md). Returns what changed."""
    code_universe(kappa_universe)
    mechanisms([list(tag) for tag in tags])
    if hint_policy is not None and hint_policy not in HINT_POLICIES:
        raise SettingsError("hint_policy", f"must be one of {', '.join(HINT_POLICIES)}, not {hint_policy[:40]!r}")
    locked = Study.objects.select_for_update().get(pk=study.pk)
    old_rules, old_tags = locked.rq4()
    in_use = set(AdvantageTag.objects.filter(study=locked).values_list("mechanism", flat=True))
    removed = sorted(in_use - {key for key, _ in tags})
    if removed:
        raise SettingsError("mechanisms", f"tag(s) {', '.join(removed)} are used by tagged pairs: keep them")
    hint_policy = locked.hint_policy if hint_policy is None else hint_policy
    changed = [
        name
        for name, before, after in (
            ("kappa_universe", locked.kappa_universe, kappa_universe),
            ("rq4_rules", old_rules, rules),
            ("mechanisms", old_tags, list(tags)),
            ("hint_policy", locked.hint_policy, hint_policy),
        )
        if before != after
    ]
    if not changed:
        return []
    detail = {"hint_policy": {"from": locked.hint_policy, "to": hint_policy}} if "hint_policy" in changed else {}
    locked.kappa_universe, locked.hint_policy = kappa_universe, hint_policy
    locked.rq4_settings = {"rules": asdict(rules), "mechanisms": [list(tag) for tag in tags]}
    locked.save(update_fields=["kappa_universe", "rq4_settings", "hint_policy"])
    study.kappa_universe, study.rq4_settings, study.hint_policy = (
        locked.kappa_universe, locked.rq4_settings, locked.hint_policy
    )  # fmt: skip
    record("study.analysis", f"analysis settings changed: {', '.join(changed)}", actor=actor, study_id=study.pk,
           kappa_universe=kappa_universe, rq4=locked.rq4_settings, **detail)  # fmt: skip
    if {"kappa_universe", "rq4_rules"} & set(changed):
        analysis_changed(study_id=study.pk)
    return changed
