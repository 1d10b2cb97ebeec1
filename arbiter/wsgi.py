"""WSGI entry point for gunicorn: `gunicorn arbiter.wsgi` (and runserver, through WSGI_APPLICATION)."""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from webapp.process_role import web_process_mark

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
web_process_mark()  # this process never starts an agent environment (webapp/process_role.py)
application = get_wsgi_application()
# The URL configuration imports every view module. Django does that at a process's first
# request, which then took a second or more on a busy machine (issue 56): do it while the
# worker starts instead, before it accepts connections.
get_resolver().url_patterns
