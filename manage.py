#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# `make install` marks a development checkout (var/ is neither in git nor in the Docker image): there, commands run
# as the README writes them, with DEBUG=1, unless DEBUG or SECRET_KEY says otherwise (docs/deploy.md).
DEVELOPMENT_MARK = Path(__file__).resolve().parent / "var" / "development"


def main() -> None:
    if DEVELOPMENT_MARK.exists() and "SECRET_KEY" not in os.environ:
        os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
