"""The navigation offers each role the pages it can use, and a way past it for keyboard users."""

from __future__ import annotations

import re

import pytest

from tests.factories import client_for

pytestmark = pytest.mark.django_db


def links(user) -> list[str]:
    body = client_for(user).get("/trajectories/").content.decode()
    nav = re.search(r"<nav>(.*?)</nav>", body, re.S).group(1)
    return re.findall(r">([^<]+)</a>", nav)


def test_each_role_is_offered_the_pages_it_can_use(annotator, adjudicator, admin_user, outsider):
    assert links(annotator) == ["Runs", "My queue", "Discussions", "Codebooks", "API"]
    assert links(adjudicator) == ["Runs", "Discussions", "Adjudication", "Studies", "Codebooks", "API"]
    admin = ["Runs", "Discussions", "Adjudication", "Studies", "Codebooks", "Import", "People", "API"]
    assert links(admin_user) == admin
    assert links(outsider) == ["Runs", "Codebooks", "API"]  # signed in, no role yet


def test_the_first_tab_stop_skips_to_the_content(annotator):
    body = client_for(annotator).get("/annotate/").content.decode()
    assert body.index('class="skip-link" href="#main"') < body.index("<nav>")
    assert '<main id="main"' in body
