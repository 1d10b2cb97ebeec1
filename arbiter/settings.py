"""Settings, read from the environment once.

Every value has a safe default for the embedded mode (`make run`): SQLite and a
filesystem Celery broker under the storage folder, a secret key generated there on
first start, DEBUG off. Production sets DATABASE_URL, CELERY_BROKER_URL, SECRET_KEY
and ALLOWED_HOSTS. The README has the full table.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env") if (BASE_DIR / ".env").exists() else None

# Storage folder: the SQLite file, broker messages, uploads, models, exports.
VAR_DIR = Path(env.str("ARBITER_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()


def _owner_only(folder: Path) -> None:
    """The storage folder holds the database, sessions, the secret key and uploads: made, or
    kept, readable by its owner alone (another local user cannot open anything inside, whatever
    the files' own modes). A folder this process does not own is left as the deployment set it."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_uid == os.getuid() and folder.stat().st_mode & 0o077:
        folder.chmod(0o700)


_owner_only(VAR_DIR)
UPLOAD_DIR = VAR_DIR / "uploads"


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once into the storage folder."""
    from_env = env.str("SECRET_KEY", default="")
    if from_env:
        return from_env
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
# Earlier keys after a rotation (comma-separated): sessions, signed values and stored judge keys
# made under them still open; everything new uses SECRET_KEY.
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
CSRF_FAILURE_VIEW = "webapp.views.csrf_failure"  # the 403 page in the site's layout, saying what to do

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "axes",
    "arbiter",  # the project's wiring (this settings module, the URLs, the Celery app); its command generate_docs
    "webapp",
    "annotate",
    "rewardmodel",
    "training",
]

MIDDLEWARE = [
    "webapp.middleware.BodyLimitMiddleware",  # first: refuses an oversized body before anything reads it
    "django.middleware.security.SecurityMiddleware",
    "webapp.api_errors.ApiJsonErrorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "webapp.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username
# from one client address, that account's logins from that address are refused for
# AXES_COOLOFF_MINUTES, with a page that says so (the account and the address together: the
# others behind one office or proxy address log in as usual, and nobody can lock a colleague out
# from elsewhere); an admin unlocks at once in the Django admin (Axes: access attempts,
# delete) or with `manage.py axes_reset_username NAME`. API tokens are not passwords: unaffected.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=10)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_COOLOFF_MINUTES = env.int("AXES_COOLOFF_MINUTES", default=15)
# Behind N proxies, the client's address is read from X-Forwarded-For (0: REMOTE_ADDR itself).
AXES_IPWARE_PROXY_COUNT = env.int("AXES_IPWARE_PROXY_COUNT", default=0) or None
AXES_COOLOFF_TIME = timedelta(minutes=AXES_COOLOFF_MINUTES)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
AXES_VERBOSE = False

ROOT_URLCONF = "arbiter.urls"
WSGI_APPLICATION = "arbiter.wsgi.application"

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
                "webapp.context_processors.roles",
            ],
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'arbiter.sqlite3'}")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded mode shares one file between the web server and the worker.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    # Parameters travel apart from the SQL, so psycopg prepares statements that repeat
    # (after 5 runs on a connection) and PostgreSQL stops re-planning them: the labeling
    # screen's joins spent more time in planning than in execution
    # (benchmarks/labeling_cycle.py, benchmarks/RESULTS.md).
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 5}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Django's backend with a health check that needs no round trip (webapp/postgres/base.py).
        DATABASES["default"]["ENGINE"] = "webapp.postgres"
    if env.bool("DB_POOL", default=False):
        # Django's own connection pool (psycopg_pool): each process keeps up to DB_POOL_MAX
        # connections and lends one to each request (persistent connections must be off).
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1,
            "max_size": env.int("DB_POOL_MAX", default=8),
            "timeout": 10,
        }
        DATABASES["default"]["CONN_MAX_AGE"] = 0
    else:
        DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
        # A persistent connection is checked at each request's first query, so one broken by a
        # database restart is replaced instead of failing that request: by a look at its socket,
        # and with `SELECT 1` only when the server has sent something (webapp/postgres/base.py);
        # off with DB_CONN_HEALTH_CHECKS=false.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("DB_CONN_HEALTH_CHECKS", default=True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "webapp.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Tests and `runserver` serve static files from the app folders directly.
WHITENOISE_USE_FINDERS = True

# Session cookies: secure when served over HTTPS (set SECURE_COOKIES=true there).
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Uploads. A body over DATA_UPLOAD_MAX_MEMORY_SIZE (JSON posted to the API) is refused.
# How long a process keeps an API token's lookup (user, roles): the bound on how late a
# revoked token, a deactivated user or changed roles take effect (webapp/authentication.py).
TOKEN_CACHE_SECONDS = env.float("TOKEN_CACHE_SECONDS", default=5.0)
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("API_MAX_BODY_BYTES", default=50 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = None
# The size limit is checked from the declared length and while the body is read.
FILE_UPLOAD_HANDLERS = [
    "webapp.uploads.UploadLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# Trajectory import limits.
IMPORT_MAX_UPLOAD_BYTES = env.int("IMPORT_MAX_UPLOAD_BYTES", default=512 * 1024 * 1024)
# Every route's body is refused from its declared length before a byte is read, with a 413 that
# names the limit (webapp/uploads.py, ROUTE_LIMITS): a form or a small JSON body at most
# FORM_MAX_BODY_BYTES; a correction CORRECTION_MAX_BODY_BYTES; the import JSON API_MAX_BODY_BYTES,
# an import upload IMPORT_MAX_UPLOAD_BYTES, a gold file GOLD_MAX_UPLOAD_BYTES; and a request from
# nobody logged in (the login form) ANONYMOUS_MAX_BODY_BYTES, whatever the route.
FORM_MAX_BODY_BYTES = env.int("FORM_MAX_BODY_BYTES", default=2 * 1024 * 1024)
ANONYMOUS_MAX_BODY_BYTES = env.int("ANONYMOUS_MAX_BODY_BYTES", default=64 * 1024)
CORRECTION_MAX_BODY_BYTES = env.int("CORRECTION_MAX_BODY_BYTES", default=1_000_000)
GOLD_MAX_UPLOAD_BYTES = env.int("GOLD_MAX_UPLOAD_BYTES", default=5 * 1024 * 1024)
IMPORT_INLINE_MAX_BYTES = env.int("IMPORT_INLINE_MAX_BYTES", default=1024 * 1024)
# A JSONL line longer than this is refused without being held in memory (a JSON document is
# read in blocks and has no such limit).
IMPORT_MAX_LINE_BYTES = env.int("IMPORT_MAX_LINE_BYTES", default=64 * 1024 * 1024)
TRAJECTORY_MAX_TEXT_CHARS = env.int("TRAJECTORY_MAX_TEXT_CHARS", default=100_000)
TRAJECTORY_MAX_STEPS = env.int("TRAJECTORY_MAX_STEPS", default=500)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webapp.authentication.TokenWithRolesAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Strict JSON: too deep, NaN, 1e400, lone surrogates and NUL are a 400 (core/json_input.py).
    "DEFAULT_PARSER_CLASSES": [
        "webapp.api_input.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "webapp.api_schema.ArbiterAutoSchema",
    "EXCEPTION_HANDLER": "webapp.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # `?format=` names a dataset format (trl, raw, ...), not a DRF renderer.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Human feedback on LLM agents: trajectories, comparisons, judgements, datasets and training runs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "CampaignStatusEnum": "annotate.models.Campaign.Status",
        "JobStatusEnum": "webapp.models.JobStatus",
        "NewCampaignStatusEnum": [("draft", "draft"), ("active", "active")],
        "JudgeKindEnum": "annotate.models.Judge.Kind",
        "CorrectionKindEnum": "annotate.models.Correction.Kind",
        "CorrectionStatusEnum": "annotate.models.Correction.Status",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "webapp.api_schema.add_error_responses",
    ],
}

# Celery. The embedded default is kombu's filesystem transport (no broker server), with messages
# written whole before a reader can see them (webapp/broker.py).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
CELERY_BROKER_DIR = VAR_DIR / "celery-broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT = "webapp.broker:Transport"
    for sub in ("queue", "processed", "control"):
        (CELERY_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 6 * 3600}
# Jobs write their results to the database; nothing reads Celery results.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # httpx2 (the judges' client) logs every request at INFO: a judge run's thousands of lines.
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
# Background jobs (imports, dataset builds, runs) share one lifecycle (webapp/jobs.py): a
# worker beats a running job's heartbeat every JOB_HEARTBEAT_SECONDS; Celery beat sweeps
# every JOB_SWEEP_SECONDS and fails a job silent for longer than its kind's stale limit,
# so a dead worker's job is failed within a minute whether or not anyone looks.
JOB_HEARTBEAT_SECONDS = env.float("JOB_HEARTBEAT_SECONDS", default=5.0)
JOB_SWEEP_SECONDS = env.float("JOB_SWEEP_SECONDS", default=10.0)
JOB_SWEEP_QUEUE = env.str("JOB_SWEEP_QUEUE", default="default")
IMPORT_STALE_SECONDS = env.int("IMPORT_STALE_SECONDS", default=45)
# Dataset snapshots: larger ones are built by a job.
SNAPSHOT_INLINE_MAX_JUDGEMENTS = env.int("SNAPSHOT_INLINE_MAX_JUDGEMENTS", default=20_000)
SNAPSHOT_STALE_SECONDS = env.int("SNAPSHOT_STALE_SECONDS", default=45)
# A campaign fill over more trajectories than this is built by a worker, with progress.
FILL_INLINE_MAX_TRAJECTORIES = env.int("FILL_INLINE_MAX_TRAJECTORIES", default=5_000)
FILL_STALE_SECONDS = env.int("FILL_STALE_SECONDS", default=45)
EXPORT_DIR = VAR_DIR / "exports"
RUN_STALE_SECONDS = env.int("RUN_STALE_SECONDS", default=45)
# Each worker beats a row every WORKER_BEAT_SECONDS (webapp/workers.py); one silent for
# WORKER_ALIVE_SECONDS counts as dead, and pages listing jobs say no worker takes their queue.
WORKER_BEAT_SECONDS = env.float("WORKER_BEAT_SECONDS", default=10.0)
WORKER_ALIVE_SECONDS = env.float("WORKER_ALIVE_SECONDS", default=45.0)
RUN_QUEUE = env.str("RUN_QUEUE", default="gpu")  # the Celery queue runs are sent to
CELERY_BEAT_SCHEDULE = {
    "sweep-stale-jobs": {
        "task": "webapp.sweep_stale_jobs",
        "schedule": JOB_SWEEP_SECONDS,
        "options": {"queue": JOB_SWEEP_QUEUE, "expires": JOB_SWEEP_SECONDS},
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Environments the training half may use besides the built-ins, by name (docs/environments.md):
# a JSON file {"name": {"class": "mcp" | "package.module:Class", "options": {...}}, ...}.
# Variables a chat judge may read its key from besides ARBITER_JUDGE_* (comma-separated names);
# the deployment's own settings are never among them (docs/judges.md).
# How many corrections one person may store of one side of a comparison, and in an hour.
CORRECTIONS_PER_SIDE = env.int("CORRECTIONS_PER_SIDE", default=5)
CORRECTIONS_PER_HOUR = env.int("CORRECTIONS_PER_HOUR", default=60)
JUDGE_KEY_ENV_ALLOWED = frozenset(env.list("JUDGE_KEY_ENV_ALLOWED", default=[]))
# Whether a chat judge may call private and loopback addresses (a model server on this machine or
# the office network): on for the embedded default (no DATABASE_URL), off for a deployment unless
# set. Link-local and cloud metadata addresses never (training/judges/addresses.py).
JUDGE_ALLOW_PRIVATE_ADDRESSES = env.bool(
    "JUDGE_ALLOW_PRIVATE_ADDRESSES", default=not env.str("DATABASE_URL", default="")
)
ARBITER_ENVIRONMENTS_FILE = env.str("ARBITER_ENVIRONMENTS_FILE", default="")


def _environments() -> dict:
    import json

    if not ARBITER_ENVIRONMENTS_FILE:
        return {}
    try:
        value = json.loads(Path(ARBITER_ENVIRONMENTS_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"ARBITER_ENVIRONMENTS_FILE {ARBITER_ENVIRONMENTS_FILE}: {exc}") from None
    if not isinstance(value, dict):
        raise RuntimeError(f"ARBITER_ENVIRONMENTS_FILE {ARBITER_ENVIRONMENTS_FILE}: a JSON object of environments")
    return value


ARBITER_ENVIRONMENTS = _environments()
# Packages whose environment classes a run may name by dotted path (mypackage.envs:TicketDesk);
# a run config is input, and importing a module runs its code, so none by default.
ARBITER_ENVIRONMENT_MODULES = tuple(env.list("ARBITER_ENVIRONMENT_MODULES", default=[]))
# The Celery queue of the jobs that start an environment outside a run (a correction's replay, a
# description of an environment's tools): the web process never starts one (docs/environments.md).
ENVIRONMENT_QUEUE = env.str("ENVIRONMENT_QUEUE", default="default")
