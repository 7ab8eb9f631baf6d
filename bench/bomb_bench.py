"""Bomb benchmark (`make bench`): the importer's peak RSS while it refuses each decompression bomb
and giant line, each import in its own process (its RSS its own, `wait4` rusage), beside the same
process importing a small ordinary run (the baseline: Django and the parsers loaded).

Bombs (built once under var/bench/bombs/): a 1 GiB `.jsonl.gz` (~1 MB), a `.zip` of 1,024 members
of 1 MiB zeros, a `.tar.gz` with a 1 GiB member, a 200 MiB line in a plain file. Target: every bomb
refused, naming its file, with peak RSS at most 80 MiB over the baseline (a line costs up to twice
PARALLAX_MAX_LINE_BYTES, 32 MiB by default, while it is refused)."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "var" / "bench" / "bombs"
MiB = 2**20


def build() -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    bombs = {
        "gzip 1 GiB": OUT / "bomb.jsonl.gz",
        "zip 1,024 × 1 MiB": OUT / "many.zip",
        "tar.gz 1 GiB member": OUT / "bomb.tar.gz",
        "200 MiB line": OUT / "long.jsonl",
        "ordinary run (baseline)": OUT / "ok.jsonl",
    }
    header = (
        b'{"type":"run","format":"parallax/1","task":{"benchmark":"b","id":"bomb"},'
        b'"agent":{"system":"Codex"},"mode":"concurrent"}\n'
    )
    if not bombs["gzip 1 GiB"].exists():
        with gzip.open(bombs["gzip 1 GiB"], "wb", compresslevel=9) as gz:
            gz.write(header)
            line = b" " * 1023 + b"\n"
            for _ in range(1024):
                gz.write(line * 1024)
    if not bombs["zip 1,024 × 1 MiB"].exists():
        with zipfile.ZipFile(bombs["zip 1,024 × 1 MiB"], "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for i in range(1024):
                zf.writestr(f"m{i:04d}.jsonl", b"\0" * MiB)
    if not bombs["tar.gz 1 GiB member"].exists():

        class Zeros(io.RawIOBase):
            left = 1024 * MiB

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = b"\0" * n
                self.left -= n
                return n

        with tarfile.open(bombs["tar.gz 1 GiB member"], "w:gz", compresslevel=1) as tf:
            info = tarfile.TarInfo("huge.jsonl")
            info.size = Zeros.left
            tf.addfile(info, io.BufferedReader(Zeros()))
    if not bombs["200 MiB line"].exists():
        with bombs["200 MiB line"].open("wb") as out:
            out.write(header)
            out.write(b'{"type":"event","text":"' + b"x" * (200 * MiB) + b'"}\n')
    if not bombs["ordinary run (baseline)"].exists():
        bombs["ordinary run (baseline)"].write_bytes(
            header + b'{"type":"context","id":"main","role":"main"}\n'
            b'{"type":"event","context":"main","seq":0,"kind":"message","text":"hi"}\n'
        )
    return bombs


def rss_of_import(path: Path, env: dict[str, str]) -> tuple[float, str]:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "import_trajectories", str(path)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    out = proc.stdout.read() if proc.stdout else ""
    _, _, usage = os.wait4(proc.pid, 0)
    lines = out.strip().splitlines()
    said = next((line for line in lines if "refusing" in line), lines[0] if lines else "")
    return usage.ru_maxrss / 1024, said


def main() -> None:
    if sys.argv[1:] == ["--build"]:
        build()
        return
    # Built in a process of its own: a child's peak RSS counts its parent's at fork, and building
    # the 200 MiB line takes 400 MiB.
    subprocess.run([sys.executable, __file__, "--build"], check=True)
    bombs = build()
    db = OUT / "bench.sqlite3"
    db.unlink(missing_ok=True)
    env = {**os.environ, "DEBUG": "1", "DATABASE_URL": f"sqlite:///{db}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    rows = [(name, *rss_of_import(path, env)) for name, path in bombs.items()]
    baseline = rows[-1][1]
    print("| input | peak RSS | over the baseline | what the import said |")
    print("| --- | ---: | ---: | --- |")
    for name, rss, said in rows:
        print(f"| {name} | {rss:.0f} MiB | {rss - baseline:+.0f} MiB | {said[:110]} |")
    worst = max(rss for _, rss, _ in rows[:-1]) - baseline
    print(f"Target: every bomb refused, at most 80 MiB over the baseline; worst {worst:+.0f} MiB.")


if __name__ == "__main__":
    main()
