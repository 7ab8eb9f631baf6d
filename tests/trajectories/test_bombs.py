"""Decompression bombs and giant lines are refused early, with the file named, and the importer's
memory stays bounded (traced Python allocations, measured while each bomb is refused)."""

from __future__ import annotations

import gzip
import io
import tarfile
import tracemalloc
import zipfile

import pytest

from tests.factories import simple_run, write_jsonl
from trajectories.models import Run
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db
MIB = 1024 * 1024
PEAK_LIMIT = 80 * MIB  # far below what any of these bombs would take to unpack (64 MiB to 1 GiB)


def refused(paths) -> tuple[str, int]:
    tracemalloc.start()
    try:
        report = import_paths(paths=paths)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.status for r in report.results] == ["failed"], report.results
    assert not Run.objects.exists()
    return report.results[0].message, peak


def spaces_gzip(size: int, *, newlines: bool, first: bytes = b"") -> bytes:
    """`size` bytes of spaces (in 1 KiB lines, or one line), after `first`, gzipped: about size/1000."""
    out = io.BytesIO()
    chunk = (b" " * 1023 + b"\n") * 1024 if newlines else b" " * MIB
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(first)
        for _ in range(size // MIB):
            gz.write(chunk)
    return out.getvalue()


def test_a_gzip_bomb_is_refused_as_it_streams(tmp_path):
    bomb = tmp_path / "run.jsonl.gz"
    header = write_jsonl(tmp_path / "h.jsonl", simple_run("bomb")[:1]).read_bytes()
    bomb.write_bytes(spaces_gzip(512 * MIB, newlines=True, first=header))  # ~0.5 MB that unpacks to 512 MiB
    message, peak = refused([bomb])
    assert message.startswith("run.jsonl.gz") and "expands more than 200x" in message, message
    assert peak < PEAK_LIMIT, peak


def test_a_gzip_bomb_of_one_line_is_refused_at_the_line_limit(tmp_path, settings):
    settings.PARALLAX_MAX_LINE_BYTES = 4 * MIB
    bomb = tmp_path / "one.jsonl.gz"
    bomb.write_bytes(spaces_gzip(64 * MIB, newlines=False))
    message, peak = refused([bomb])
    assert message == "one.jsonl.gz:1: line is longer than 4,194,304 bytes (limit); refusing"
    assert peak < 16 * MIB, peak


def test_a_zip_of_many_small_members_is_refused_by_its_total_ratio(tmp_path):
    bomb = tmp_path / "many.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for i in range(512):  # each 128 KiB member is under the per-member check
            zf.writestr(f"m{i:04d}.jsonl", b"\0" * 128 * 1024)
    message, peak = refused([bomb])
    assert "many.zip" in message and "would expand more than 200x" in message
    assert peak < PEAK_LIMIT, peak


def test_a_tar_gz_bomb_is_refused_before_it_is_unpacked(tmp_path):
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=9) as tf:
        info = tarfile.TarInfo("huge.jsonl")
        info.size = 256 * MIB

        class Zeros(io.RawIOBase):
            left = info.size

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = b"\0" * n
                self.left -= n
                return n

        tf.addfile(info, io.BufferedReader(Zeros()))
    message, peak = refused([bomb])
    assert "bomb.tar.gz" in message and "would expand more than 200x" in message
    assert peak < PEAK_LIMIT, peak
    assert not list(tmp_path.glob("**/huge.jsonl"))


def test_a_line_longer_than_the_limit_is_refused_by_number(tmp_path, settings):
    settings.PARALLAX_MAX_LINE_BYTES = MIB
    lines = simple_run("long")
    lines[2]["text"] = "x" * (2 * MIB)
    path = write_jsonl(tmp_path / "long.jsonl", lines)
    message, peak = refused([path])
    assert message == "long.jsonl:3: line is longer than 1,048,576 bytes (limit); refusing"
    assert peak < 8 * MIB, peak


def test_ordinary_compressed_logs_still_import(tmp_path):
    path = tmp_path / "ok.jsonl.gz"
    path.write_bytes(gzip.compress(write_jsonl(tmp_path / "ok.jsonl", simple_run("ok")).read_bytes()))
    (tmp_path / "ok.jsonl").unlink()
    report = import_paths(paths=[path])
    assert [r.status for r in report.results] == ["imported"], report.results
