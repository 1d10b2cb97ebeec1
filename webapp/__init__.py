"""Arbiter's core app: settings, URLs, the Celery app, roles and the shared base model."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]
