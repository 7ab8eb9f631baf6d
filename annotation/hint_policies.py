"""When a study shows its annotators the failure-signature hits of the runs they code (`Study.hint_policy`;
docs/annotation.md, "Hints"): the policies and what each allows. ORM-free, so that the model, its forms,
services and commands read the one vocabulary; `access.hint_access` applies it."""

from __future__ import annotations

HINT_NEVER = "never"
HINT_AFTER_FIRST_SUBMISSION = "after_first_submission"
HINT_ALWAYS = "always"
HINT_POLICIES = {
    HINT_NEVER: "never",
    HINT_AFTER_FIRST_SUBMISSION: "after the annotator's first submission of the run",
    HINT_ALWAYS: "always",
}
DEFAULT_HINT_POLICY = HINT_AFTER_FIRST_SUBMISSION


def hints_allowed(policy: str, *, submitted: bool) -> bool:
    """Does a study with this policy show hits to an annotator who has (not) submitted the run yet?"""
    return policy == HINT_ALWAYS or (policy == HINT_AFTER_FIRST_SUBMISSION and submitted)
