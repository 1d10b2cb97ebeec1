"""gunicorn's access log without secrets: a set-password link carries its one-time token in the
path (/team/password/<uid>/<token>/), and the log would keep it. Used by `make run`, the
Dockerfile and docker-compose (`--logger-class webapp.gunicorn_logging.RedactingLogger`)."""

from __future__ import annotations

import re

from gunicorn.glogging import Logger

_TOKEN_PATH = re.compile(r"(/password/[^/\s\"?]+/)[^/\s\"?]+")


def redact(text: str) -> str:
    return _TOKEN_PATH.sub(r"\1[redacted]", text)


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in atoms.items()}
