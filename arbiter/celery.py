"""The Celery app, configured from Django settings (keys prefixed CELERY_).

Two queues: `default` for I/O work (imports, exports, statistics) and `gpu` for
rollouts and training. A worker takes one queue or both:

    celery -A arbiter worker -Q default
    celery -A arbiter worker -Q gpu --concurrency 1
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("default"), Queue("gpu"))
# Training and rollouts go to GPU workers; everything else stays on `default`.
app.conf.task_routes = {
    "training.*": {"queue": "gpu"},
    "rewardmodel.*": {"queue": "gpu"},
    "webapp.run_execute": {"queue": "gpu"},
}
app.autodiscover_tasks()
