"""What this process is for. The web process (gunicorn or runserver, through arbiter/wsgi.py)
serves pages and the API and never starts an agent environment: a worker may hold servers and
paths the web host has none of, and an environment that hangs must not hold a web thread.
Workers, commands and tests may start them (training/envs/services.py asks here)."""

from __future__ import annotations

_web = False


def web_process_mark() -> None:
    global _web
    _web = True


def is_web_process() -> bool:
    return _web
