"""Django for a bench script: production-like settings on a scratch SQLite database, or on
BENCH_DATABASE_URL when it is set (PostgreSQL: the bench flushes it)."""

from __future__ import annotations

import os
import tempfile


def setup_django(prefix: str) -> str:
    """Configure and start Django; return the scratch directory (the SQLite file lives there)."""
    scratch = tempfile.mkdtemp(prefix=prefix)
    os.environ.update(
        DEBUG="0",
        SECRET_KEY="bench-" + "x" * 50,
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{scratch}/db.sqlite3",
        ALLOWED_HOSTS="testserver",
        SECURE_SSL_REDIRECT="0",
    )
    import django

    django.setup()
    return scratch
