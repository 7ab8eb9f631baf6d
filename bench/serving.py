"""The servers a load bench runs against, as docker-compose.yml runs them: the settings they start with, gunicorn
(3 sync workers, DEBUG=0) and a Celery worker, started and stopped. Imports nothing of Django: the benches set
their environment from `server_env` before `django.setup()`."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST, WORKERS = "127.0.0.1", 3


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """Production settings on loopback (plain http: production terminates TLS in front), and `extra`."""
    return {
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 50,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "ALLOWED_HOSTS": HOST,
        "SECURE_SSL_REDIRECT": "0",
        **extra,
    }


def start(command: list[str], *, log: Path, port: int | None = None) -> subprocess.Popen:
    """Run `command` from the repository with this process's environment, its output in `log`; with a `port`,
    wait until /healthz answers there (a server that never comes up is stopped and the bench ends, naming its log)."""
    process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ), stdout=log.open("wb"), stderr=subprocess.STDOUT)
    if port is None:
        return process
    for _ in range(300):
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.terminate()
    raise SystemExit(f"{' '.join(command[1:4])} did not come up on {HOST}:{port}; its log: {log}")


def gunicorn(port: int, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"{HOST}:{port}", "--workers", str(WORKERS),
               "--timeout", "120"]  # fmt: skip
    return start(command, log=log, port=port)


def celery_worker(log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency=1", "--without-gossip",
               "--without-mingle", "--loglevel=INFO"]  # fmt: skip
    return start(command, log=log)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
