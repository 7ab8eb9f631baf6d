"""A second study set up entirely in the browser: the adjudicator creates it (four annotators, three
per run, runs picked by benchmark), sees its balance, adds runs one at a time and replaces an
annotator mid-study (what they coded stays); an admin makes a second codebook version with a merge
and the study moves to it; an annotator then finds the runs in their queue."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.roles import ANNOTATOR
from annotation.models import Annotation, Assignment, Label, Study
from annotation.selectors.studies import study_balance
from tests.factories import code_keys, more_pairs, new_user
from tests.integration.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_study_designed_run_and_changed_in_the_browser(
    page,
    live_server,
    study,
    codebook,
    trio,
    adjudicator,
    admin_user,
    tmp_path,
):
    fourth, fifth = new_user("coder4", ANNOTATOR), new_user("coder5", ANNOTATOR)
    login(page, live_server, "senior", "pw-senior")
    page.goto(f"{live_server.url}/annotate/studies/")
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Name").fill("Second study")
    page.get_by_label("Coders per run (k)").fill("3")
    page.get_by_label("Seed").fill("11")
    for coder in ("coder1", "coder2", "coder3", "coder4"):
        page.get_by_label(coder, exact=True).check()
    page.get_by_label("NL2RepoBench", exact=True).check()  # the runs: one benchmark
    expect(page.locator("#run-count")).to_contain_text("3 runs match")
    page.get_by_role("button", name="Create the study").click()
    expect(page).to_have_url(re.compile(r"/annotate/studies/\d+/manage/$"))
    expect(page.locator(".messages")).to_contain_text("3 runs, 9 assignments")
    second = Study.objects.get(name="Second study")
    assert (second.coders_per_run, second.seed, second.annotators.count()) == (3, 11, 4)

    # runs arrive one at a time: each is assigned at once and the groups stay within one
    for run_id in more_pairs(tmp_path, 5):
        page.get_by_label("Run ids").fill(str(run_id))
        page.get_by_role("button", name="Add runs").click()
        expect(page.locator(".messages")).to_contain_text("1 runs added and assigned")
    report = study_balance(study=second)
    assert report["runs"] == 8 and report["groups"]["spread"] <= 1 and report["annotators"]["spread"] <= 1
    expect(page.locator("text=coder groups")).to_be_visible()

    # coder1 codes one run, then leaves; coder5 takes their other runs; what coder1 coded stays theirs
    coded = code_keys(Assignment.objects.filter(study=second, annotator=trio[0]).first(), ["no-assembly-owner"])
    page.get_by_label("Annotator leaving").select_option(label="coder1")
    page.get_by_label("New annotator").select_option(label="coder5")
    page.get_by_role("button", name="Replace", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("coder1 left")
    assert list(Assignment.objects.filter(study=second, annotator=trio[0])) == [coded.assignment]
    assert Assignment.objects.filter(study=second, annotator=fifth).count() == 5
    assert list(Annotation.objects.filter(assignment__study=second)) == [coded]
    assert set(study_balance(study=second)["coders_per_run"]) == {3}  # every run still has three coders

    # a refusal names its field and changes nothing
    page.get_by_label("Coders per run (k)").evaluate("el => el.removeAttribute('disabled')")
    page.get_by_label("Name").first.fill("S")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".form-errors")).to_contain_text("a study named 'S' exists")
    second.refresh_from_db()
    assert second.name == "Second study"

    # an admin makes a second codebook version with a merge, freezes it, and moves the study to it
    page.get_by_role("button", name="Log out").click()
    login(page, live_server, "boss", "pw-boss")
    page.goto(f"{live_server.url}/codebooks/{codebook.pk}/")
    page.get_by_role("button", name="New version").click()
    page.get_by_role("link", name="Edit draft").click()
    merge = page.locator("form", has=page.locator("input[name=op][value=merge]"))
    merge.get_by_label("Keys to merge").fill("no-assembly-owner, no-pipeline-owner")
    merge.get_by_label("Into key").fill("no-delivery-owner")
    merge.get_by_label("Name").fill("No Delivery Owner")
    merge.get_by_role("button", name="Merge").click()
    expect(page.locator("#editor")).to_contain_text("No Delivery Owner")
    page.get_by_role("button", name="Freeze").first.click()
    expect(page.locator(".messages")).to_contain_text("is frozen")
    page.goto(f"{live_server.url}/annotate/studies/{second.pk}/codebook/")
    page.get_by_label("To").select_option(label=f"{codebook.name} v{codebook.version + 1}")
    page.get_by_label("Key map").fill("no-assembly-owner -> no-delivery-owner\nno-pipeline-owner -> no-delivery-owner")
    page.get_by_role("button", name="Move the study").click()
    expect(page.locator(".messages")).to_contain_text("1 label(s) carried over, 0 coding(s) reopened")
    second.refresh_from_db()
    assert second.codebook.version == codebook.version + 1
    assert [label.code.key for label in Label.objects.filter(annotation=coded)] == ["no-delivery-owner"]

    # the annotator who joined finds the study's runs in their queue
    page.get_by_role("button", name="Log out").click()
    login(page, live_server, "coder4", "pw-coder4")
    page.goto(f"{live_server.url}/annotate/?study={second.pk}")
    expect(page.locator("main")).to_contain_text("Second study")
    assert fourth.assignments.filter(study=second).count() == 6
