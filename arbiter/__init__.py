"""The project's wiring, above every app: the settings, the URL configuration (urls.py and the
API's api_urls.py), the Celery app, the WSGI entry point and the generated docs. The apps
(webapp, annotate, rewardmodel, training) never import it: they queue tasks by name through
`celery.current_app` (webapp/jobs.py `task_send`) and Django finds their URLs and tasks here."""

from arbiter.celery import app as celery_app

__all__ = ["celery_app"]
