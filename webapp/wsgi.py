"""WSGI entry point for gunicorn: `gunicorn webapp.wsgi` (and runserver, through WSGI_APPLICATION)."""

import os

from django.core.wsgi import get_wsgi_application

from webapp.process_role import web_process_mark

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
web_process_mark()  # this process never starts an agent environment (webapp/process_role.py)
application = get_wsgi_application()
