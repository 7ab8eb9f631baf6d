"""The upload page in Debian Chromium: an over-size file is refused before anything is sent; a good
one is uploaded (with its own progress bar) and the browser lands on the import's page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import simple_run, write_jsonl
from tests.integration.conftest import login
from trajectories.models import ImportBatch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_upload_checks_the_size_first_then_follows_the_import(page, live_server, admin_user, tmp_path, settings):
    big = write_jsonl(tmp_path / "big.jsonl", simple_run("too-big"))
    settings.PARALLAX_MAX_UPLOAD_BYTES = big.stat().st_size - 1
    login(page, live_server, "boss", "pw-boss")
    page.goto(f"{live_server.url}/trajectories/imports/")
    page.set_input_files("#upload-form input[type=file]", str(big))
    expect(page.locator("#upload-error")).to_contain_text("big.jsonl is")
    expect(page.locator("#upload-error")).to_contain_text("the limit is")
    page.click("#upload-button")
    page.wait_for_timeout(500)
    assert ImportBatch.objects.count() == 0 and page.locator("#upload-progress").is_hidden()  # nothing sent

    settings.PARALLAX_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
    page.reload()
    page.set_input_files("#upload-form input[type=file]", str(big))
    expect(page.locator("#upload-error")).to_be_hidden()
    page.click("#upload-button")
    page.wait_for_url("**/trajectories/imports/*/")
    expect(page.locator("#progress")).to_contain_text("1 imported")
    assert ImportBatch.objects.get().imported == 1
