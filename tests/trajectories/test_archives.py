"""Bundles: checked for traversal, links, entry count, size and bombs before extraction."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from django.test import override_settings

from tests.factories import simple_run, write_jsonl
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


def _zip(path, entries):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def _jsonl_bytes(tmp_path, task="t-1"):
    return write_jsonl(tmp_path / f"{task}.src", simple_run(task)).read_bytes()


def test_zip_bundle_imports(tmp_path):
    bundle = _zip(
        tmp_path / "b.zip",
        [("runs/a.jsonl", _jsonl_bytes(tmp_path, "a")), ("runs/b.jsonl", _jsonl_bytes(tmp_path, "b"))],
    )
    report = import_paths(paths=[bundle])
    assert report.count("imported") == 2


def test_tar_gz_bundle_imports(tmp_path):
    data = _jsonl_bytes(tmp_path, "a")
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tf:
        info = tarfile.TarInfo("x/a.jsonl")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert import_paths(paths=[bundle]).count("imported") == 1


@pytest.mark.parametrize("name", ["../evil.jsonl", "/etc/evil.jsonl", "a/../../evil.jsonl"])
def test_zip_path_traversal_is_refused(tmp_path, name):
    bundle = _zip(tmp_path / "b.zip", [("ok.jsonl", _jsonl_bytes(tmp_path)), (name, b"{}")])
    report = import_paths(paths=[bundle])
    assert report.results[0].status == "failed"
    assert "b.zip" in report.results[0].message
    assert Run.objects.count() == 0  # checked before anything was extracted
    assert not (tmp_path.parent / "evil.jsonl").exists()


def test_zip_symlink_is_refused(tmp_path):
    bundle = tmp_path / "b.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        info = zipfile.ZipInfo("link.jsonl")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    report = import_paths(paths=[bundle])
    assert "symbolic link" in report.results[0].message


def test_tar_symlink_is_refused(tmp_path):
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tf:
        info = tarfile.TarInfo("link.jsonl")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    assert "link" in import_paths(paths=[bundle]).results[0].message


def test_zip_bomb_is_refused(tmp_path):
    bundle = _zip(tmp_path / "bomb.zip", [("zeros.jsonl", b"\0" * (50 * 1024 * 1024))])
    report = import_paths(paths=[bundle])
    assert report.results[0].status == "failed"
    assert "zip bomb" in report.results[0].message


@override_settings(PARALLAX_MAX_ARCHIVE_ENTRIES=3)
def test_too_many_entries(tmp_path):
    bundle = _zip(tmp_path / "many.zip", [(f"f{i}.jsonl", b"{}") for i in range(5)])
    assert "more than 3 entries" in import_paths(paths=[bundle]).results[0].message


@override_settings(PARALLAX_MAX_ARCHIVE_BYTES=1000)
def test_total_uncompressed_size_limit(tmp_path):
    bundle = _zip(tmp_path / "big.zip", [("a.jsonl", b"x" * 2000)])
    assert "unpack to more than" in import_paths(paths=[bundle]).results[0].message


def test_damaged_zip(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 not really")
    assert "not a readable zip" in import_paths(paths=[bad]).results[0].message
