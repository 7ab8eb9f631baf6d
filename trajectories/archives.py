"""Safe unpacking of uploaded bundles (.zip, .tar, .tar.gz/.tgz).

Every member is checked *before* anything is written: no absolute paths, no `..`, no
links or devices, at most N entries, at most B uncompressed bytes in total, and no compression
ratio that betrays a bomb — per large member, and for the archive as a whole (many small members
each under the per-member check add up). Extraction then re-checks actual sizes. A `.tar.gz` is
checked while its headers stream past, so a bomb is refused before it is unpacked.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .formats.records import FormatError

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


@dataclass(frozen=True)
class ArchiveLimits:
    max_entries: int
    max_total_bytes: int
    max_ratio: int


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(ARCHIVE_SUFFIXES)


def _check_name(name: str, archive: str) -> PurePosixPath:
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise FormatError(f"archive entry has an absolute path: {name!r}", file=archive)
    if ".." in pure.parts:
        raise FormatError(f"archive entry escapes the archive folder: {name!r}", file=archive)
    return pure


RATIO_FROM = 16 * 1024 * 1024  # an archive that unpacks to less is not checked for its ratio


def _check_totals(count: int, total: int, limits: ArchiveLimits, archive: str, packed: int) -> None:
    if count > limits.max_entries:
        raise FormatError(f"archive has more than {limits.max_entries} entries", file=archive)
    if total > limits.max_total_bytes:
        raise FormatError(
            f"archive would unpack to more than {limits.max_total_bytes:,} bytes (limit); refusing", file=archive
        )
    if total > RATIO_FROM and total > limits.max_ratio * max(packed, 1):
        raise FormatError(
            f"archive would expand more than {limits.max_ratio}x ({packed:,} bytes to at least {total:,}; "
            "a bomb?); refusing",
            file=archive,
        )


def safe_extract(archive: Path, dest: Path, limits: ArchiveLimits) -> Path:
    """Unpack `archive` into `dest` (created) after checking every entry; returns dest."""
    name = archive.name
    dest.mkdir(parents=True, exist_ok=True)
    if name.lower().endswith(".zip"):
        _extract_zip(archive, dest, limits)
    else:
        _extract_tar(archive, dest, limits)
    return dest


def _extract_zip(archive: Path, dest: Path, limits: ArchiveLimits) -> None:
    name = archive.name
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise FormatError(f"not a readable zip file ({exc})", file=name) from exc
    with zf:
        infos = zf.infolist()
        total = 0
        for count, info in enumerate(infos, start=1):
            _check_name(info.filename, name)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise FormatError(f"archive entry is a symbolic link: {info.filename!r}", file=name)
            if info.file_size > 1024 * 1024 and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise FormatError(
                    f"archive entry {info.filename!r} expands {info.file_size // max(info.compress_size, 1)}x "
                    "(zip bomb?); refusing",
                    file=name,
                )
            total += info.file_size
            _check_totals(count, total, limits, name, archive.stat().st_size)
        for info in infos:
            target = dest / _check_name(info.filename, name)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with zf.open(info) as src, target.open("wb") as out:
                while chunk := src.read(1024 * 1024):
                    written += len(chunk)
                    if written > info.file_size:  # the header lied about the size
                        raise FormatError(f"archive entry {info.filename!r} is larger than declared", file=name)
                    out.write(chunk)


def _extract_tar(archive: Path, dest: Path, limits: ArchiveLimits) -> None:
    name = archive.name
    try:
        tf = tarfile.open(archive, "r:*")  # noqa: SIM115 - closed by the `with tf:` below
    except (tarfile.TarError, OSError) as exc:
        raise FormatError(f"not a readable tar archive ({exc})", file=name) from exc
    with tf:
        total = 0
        count = 0
        members = []
        try:
            for member in tf:
                count += 1
                _check_name(member.name, name)
                if member.issym() or member.islnk():
                    raise FormatError(f"archive entry is a link: {member.name!r}", file=name)
                if not (member.isfile() or member.isdir()):
                    raise FormatError(f"archive entry is a device or special file: {member.name!r}", file=name)
                total += member.size
                _check_totals(count, total, limits, name, archive.stat().st_size)
                members.append(member)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise FormatError(f"archive is damaged ({exc})", file=name) from exc
        try:
            tf.extractall(dest, members=members, filter="data")
        except (tarfile.TarError, OSError) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            raise FormatError(f"could not unpack archive ({exc})", file=name) from exc
