"""Production settings refuse to start on a missing or public secret key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _start(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "PARALLAX_DEMO")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_production_without_secret_key_refuses_to_start():
    result = _start({"DEBUG": "0"})
    assert result.returncode != 0 and "SECRET_KEY is not set" in result.stderr


def test_a_development_checkout_runs_manage_py_as_the_readme_writes_it():
    """`make install` marks the checkout (var/development): manage.py then needs neither DEBUG nor a key; with
    DEBUG=0 or a SECRET_KEY set, it is production again."""
    mark = ROOT / "var" / "development"
    made = not mark.exists()
    mark.parent.mkdir(exist_ok=True)
    mark.touch()
    try:
        development = _start({})
        assert development.returncode == 0, development.stderr
        assert "SECRET_KEY is not set" in _start({"DEBUG": "0"}).stderr
    finally:
        if made:
            mark.unlink()
    if made:
        assert "SECRET_KEY is not set" in _start({}).stderr  # not a development checkout: production


def test_production_with_the_public_development_key_refuses_to_start():
    from config.settings import _DEV_SECRET_KEY

    result = _start({"DEBUG": "0", "SECRET_KEY": _DEV_SECRET_KEY})
    assert result.returncode != 0 and "public development key" in result.stderr


def test_production_with_a_real_key_starts():
    result = _start({"DEBUG": "0", "SECRET_KEY": "x" * 60})
    assert result.returncode == 0, result.stderr


def test_the_demo_runs_with_debug_off_on_plain_http_and_shows_the_styled_pages(tmp_path):
    """`make run`: DEBUG off (the styled error pages), yet the development key, cookies over http and
    static/ served as it is."""
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.conf import settings as s; from django.test import Client; "
         "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.WHITENOISE_USE_FINDERS); "
         "r = Client().get('/static/css/parallax.css'); print(r.status_code)"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**{k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}, "DEBUG": "0",
             "PARALLAX_DEMO": "1", "DATABASE_URL": f"sqlite:///{tmp_path}/demo.sqlite3"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[-5:] == ["False", "False", "False", "True", "200"]


def test_healthz_is_public(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok"


def test_openapi_schema_has_no_warnings_and_validates(tmp_path, db):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(out))
    text = out.read_text()
    assert "/api/annotations/{assignment_id}/" in text and "AnnotationStatusEnum" in text


def test_loading_the_url_conf_does_not_load_scikit_learn_or_scipy():
    """Every process loads the URL conf (system checks); the statistics stack loads on demand."""
    code = (
        "import django, sys; django.setup(); from django.urls import get_resolver; get_resolver().url_patterns; "
        "print(sorted(m for m in ('sklearn', 'scipy', 'numpy') if m in sys.modules))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _worker_settings(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    """What the worker's Celery app is configured with under this environment (a process of its own)."""
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from config.celery import app\n"
        "print(app.conf.beat_schedule['sweep-statistics']['schedule'], settings.PARALLAX_STATISTICS_STALE_S,"
        " app.conf.broker_transport_options['visibility_timeout'], app.conf.task_default_queue)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", **env_extra}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_the_thresholds_of_self_healing_are_settings_with_the_documented_defaults():
    """docs/deploy.md, *When a worker dies*: sweep every minute, a refresh lost after two minutes, a task handed out
    again after two hours, the queue `celery` — each changed by its environment variable."""
    assert _worker_settings({}).stdout.split() == ["60.0", "120", "7200", "celery"]
    changed = _worker_settings(
        {"PARALLAX_STATISTICS_SWEEP_S": "7", "PARALLAX_STATISTICS_STALE_S": "9",
         "PARALLAX_TASK_VISIBILITY_TIMEOUT_S": "30", "PARALLAX_TASK_QUEUE": "parallax-b"}
    )  # fmt: skip
    assert changed.stdout.split() == ["7.0", "9", "30", "parallax-b"], changed.stderr


def test_a_sweep_interval_stale_threshold_or_visibility_timeout_not_a_positive_number_refuses_to_start():
    for name, value, message in [
        ("PARALLAX_STATISTICS_SWEEP_S", "0", "PARALLAX_STATISTICS_SWEEP_S must be at least 1, got 0"),
        ("PARALLAX_STATISTICS_STALE_S", "-5", "PARALLAX_STATISTICS_STALE_S must be at least 1, got -5"),
        ("PARALLAX_STATISTICS_SWEEP_S", "1m", "PARALLAX_STATISTICS_SWEEP_S must be an integer, got '1m'"),
        ("PARALLAX_TASK_VISIBILITY_TIMEOUT_S", "0", "PARALLAX_TASK_VISIBILITY_TIMEOUT_S must be at least 1, got 0"),
    ]:
        result = _worker_settings({name: value})
        assert result.returncode != 0 and message in result.stderr, (name, value, result.stderr[-2000:])
