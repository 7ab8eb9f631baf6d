"""Parallax settings: one module, configured from the environment only.

The embedded default (no environment at all) is SQLite + Celery in eager mode, which is
what `make demo` and `make test` use. Production sets DATABASE_URL, CELERY_BROKER_URL,
SECRET_KEY, ALLOWED_HOSTS (see docs/deploy.md) and refuses to start on a default key.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


# Test runners set DEBUG=False; they still must not need production secrets.
TESTING = "pytest" in sys.modules or (len(sys.argv) > 1 and sys.argv[1] == "test")
DEBUG = env_bool("DEBUG", False)
# The local demo (`make run`): DEBUG off, so that pages and errors look as users will see them (the styled
# 404/403/500 pages, not Django's debug pages), yet on plain http with the development key and the static
# files served from static/ without collectstatic. Never set it in production.
DEMO = env_bool("PARALLAX_DEMO", False)
LOCAL = DEBUG or TESTING or DEMO

_DEV_SECRET_KEY = "parallax-insecure-development-key-do-not-use-in-production"
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not LOCAL:
        # A production process must never start on a key anyone can read in this file.
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set the SECRET_KEY environment variable (or DEBUG=1 for local development)."
        )
    SECRET_KEY = _DEV_SECRET_KEY
elif SECRET_KEY == _DEV_SECRET_KEY and not LOCAL:
    raise ImproperlyConfigured("SECRET_KEY is the public development key; set a real one.")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "accounts",
    "activity",
    "trajectories",
    "taxonomy",
    "annotation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RejectNulQueryMiddleware",
    "config.middleware.UploadSizeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.LoginRequiredMiddleware",  # 401 for htmx requests of a lapsed session
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
                "common.text.limits",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
        conn_health_checks=True,  # a kept connection the server dropped is replaced, not an error
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the demo's web process and an import run side by side. 16 KiB
    # pages (new databases only; SQLite keeps an existing file's page size): docs/performance.md.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests use a file, not Django's in-memory default: with an in-memory database the live
    # server's request threads share one connection, and concurrent requests (htmx fragments)
    # then corrupt each other's transactions.
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"parallax-test-{os.getpid()}.sqlite3"),
    }

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and TESTING:
    # The suite empties its database between transactional tests with TRUNCATE, which the coding history and the
    # activity log refuse to anyone else (annotation migration 0023).
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c parallax.allow_truncate=on"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if TESTING:
    # Fixture users are created by the dozen; real hashing would dominate the suite's time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Failed logins: after this many per username+address (or per address) the login form answers
# 429 until the window has passed. The counters live in the cache (Redis in production).
PARALLAX_LOGIN_FAILURES_PER_USER = env_int("PARALLAX_LOGIN_FAILURES_PER_USER", 5)
PARALLAX_LOGIN_FAILURES_PER_ADDRESS = env_int("PARALLAX_LOGIN_FAILURES_PER_ADDRESS", 30)
PARALLAX_LOGIN_LOCKOUT_SECONDS = env_int("PARALLAX_LOGIN_LOCKOUT_SECONDS", 15 * 60)
# How many reverse proxies in front of Parallax append to X-Forwarded-For (0: none, use the
# connecting address). The throttle keys on the address the outermost of them saw; anything a client
# puts in the header itself is ignored. PARALLAX_TRUST_X_FORWARDED_FOR=1 is the older spelling of 1.
PARALLAX_TRUSTED_PROXIES = env_int("PARALLAX_TRUSTED_PROXIES", int(env_bool("PARALLAX_TRUST_X_FORWARDED_FOR", False)))
AUTHENTICATION_BACKENDS = ["accounts.backends.ThrottledModelBackend"]
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": env_str("CACHE_URL"),
            # a Redis that is away costs a login a second, not minutes (accounts/throttle.py falls back)
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
        if env_str("CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"  # role-aware: annotation/selectors/landing.py
CSRF_FAILURE_VIEW = "config.views.csrf_failure"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if LOCAL
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEMO  # the demo serves static/ as it is
WHITENOISE_AUTOREFRESH = DEMO
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "var" / "media")))
# Uploaded bundles are written here and imported by a Celery worker.
IMPORT_UPLOAD_DIR = MEDIA_ROOT / "imports"

# Uploads: Django keeps at most this much in memory; larger files stream to disk.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Trajectory bundle limits (bytes / entries), checked before anything is extracted.
PARALLAX_MAX_UPLOAD_BYTES = env_int("PARALLAX_MAX_UPLOAD_BYTES", 512 * 1024 * 1024)
# A cell artifact (patch, prompt, test output …) longer than this is kept cut, with a warning.
PARALLAX_ARTIFACT_MAX_BYTES = env_int("PARALLAX_ARTIFACT_MAX_BYTES", 2 * 1024 * 1024)
PARALLAX_MAX_ARCHIVE_ENTRIES = env_int("PARALLAX_MAX_ARCHIVE_ENTRIES", 50_000)
PARALLAX_MAX_ARCHIVE_BYTES = env_int("PARALLAX_MAX_ARCHIVE_BYTES", 8 * 1024 * 1024 * 1024)
PARALLAX_MAX_COMPRESSION_RATIO = env_int("PARALLAX_MAX_COMPRESSION_RATIO", 200)
# A batch "running" with no progress written for this long was left by a dead worker: its page says so.
PARALLAX_IMPORT_STALL_SECONDS = env_int("PARALLAX_IMPORT_STALL_SECONDS", 10 * 60)
# Longest line of a log read into memory; a longer one fails its file, naming the line.
PARALLAX_MAX_LINE_BYTES = env_int("PARALLAX_MAX_LINE_BYTES", 32 * 1024 * 1024)
# Celery: eager (in-process) unless a broker is configured (make demo: filesystem://, below).
# A study's statistics are recomputed by the worker this many seconds after a change (a burst of
# submissions in that time costs one computation): annotation/analysis/store.py.
PARALLAX_STATISTICS_DELAY_S = env_int("PARALLAX_STATISTICS_DELAY_S", 5)
# A refresh queued (or started) this many seconds ago and not finished was lost (its worker killed, its message
# lost): the sweep below queues it again. Longer than the largest study's refresh (the 10x study's takes under 6 s).
PARALLAX_STATISTICS_STALE_S = env_int("PARALLAX_STATISTICS_STALE_S", 2 * 60, minimum=1)
# How often the worker's beat runs that sweep (seconds).
PARALLAX_STATISTICS_SWEEP_S = env_int("PARALLAX_STATISTICS_SWEEP_S", 60, minimum=1)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "memory://")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", CELERY_BROKER_URL == "memory://")
# The queue every task is sent to and the worker consumes (the web, the worker and its beat alike): two deployments
# sharing one broker give each its own.
CELERY_TASK_DEFAULT_QUEUE = env_str("PARALLAX_TASK_QUEUE") or "celery"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-import leaves the task to be redelivered
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# An unacknowledged task (its worker killed: late acks above) goes back to the queue after this many seconds on
# Redis. It must exceed the longest task, or a task still running is handed to a second worker: the longest is an
# import of the largest upload (PARALLAX_MAX_UPLOAD_BYTES), which the stall check fails after
# PARALLAX_IMPORT_STALL_SECONDS without progress. kombu's default is an hour.
PARALLAX_TASK_VISIBILITY_TIMEOUT_S = env_int("PARALLAX_TASK_VISIBILITY_TIMEOUT_S", 2 * 3600, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": PARALLAX_TASK_VISIBILITY_TIMEOUT_S}
# The worker's periodic jobs (run by `celery worker -B`, or a separate `celery beat`): statistics left behind by a
# lost refresh are queued again (annotation.analysis.store.analysis_sweep; idempotent, so two beats do no harm).
CELERY_BEAT_SCHEDULE = {
    "sweep-statistics": {"task": "annotation.tasks.sweep_statistics", "schedule": float(PARALLAX_STATISTICS_SWEEP_S)},
}
if CELERY_BROKER_URL == "filesystem://":
    # A broker that needs no server (kombu's filesystem transport): `make demo` runs a real worker
    # on it, so that an upload is imported off the request and its progress bar moves.
    BROKER_DIR = Path(env_str("PARALLAX_BROKER_DIR", str(BASE_DIR / "var" / "celery-broker")))
    (BROKER_DIR / "queue").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }

REST_FRAMEWORK = {
    # Machine clients use tokens (`manage.py create_api_token USER`); no HTTP Basic, which would let password
    # guessing bypass the login throttle. Tokens first: a request that is not authenticated (no token, a bad one)
    # is a 401 with `WWW-Authenticate: Token`, as HTTP has it, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "common.pagination.StrictPageNumberPagination",
    # DRF's three parsers, JSON's refusing a body nested too deeply with a 400 (not a RecursionError)
    "DEFAULT_PARSER_CLASSES": [
        "common.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    # JSON only; the browsable HTML API only in development (and the tests see production's API).
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        *(["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG and not TESTING else []),
    ],
}
PARALLAX_VERSION = "0.1.0"  # written into every study bundle (annotation/selectors/bundle.py)
SPECTACULAR_SETTINGS = {
    "TITLE": "Parallax API",
    "DESCRIPTION": "Import agent trajectories, read runs, pairs and process metrics.",
    "VERSION": PARALLAX_VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    # Login required everywhere, the API description included.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.schema.add_error_responses",
    ],
    # Swagger UI from the sidecar package, served by us: no CDN, and it fits the CSP below.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a `status` field with different choices: name each enum.
    "ENUM_NAME_OVERRIDES": {
        "ImportBatchStatusEnum": "trajectories.models.ImportBatch.Status",
        "AnnotationStatusEnum": "annotation.models.Annotation.Status",
        "CodebookStatusEnum": "taxonomy.models.Codebook.Status",
    },
}

# Production hardening; `manage.py check --deploy` is clean when DEBUG is off.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not LOCAL)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = not LOCAL
CSRF_COOKIE_SECURE = not LOCAL
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG or DEMO else 60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not (DEBUG or DEMO))  # check --deploy asks for it; opt out by env
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# An enforcing Content-Security-Policy: everything from our own origin, no inline script or
# style (htmx is configured not to inject styles or evaluate code; see templates/base.html).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
