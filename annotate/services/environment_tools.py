"""The tools of each environment, as a worker found them (`EnvironmentTools`). The web process
never starts an environment (webapp/process_role.py): it reads the tools here, and asks a
worker to describe an environment it has not seen (`environments_describe_missing`, when an
import brings tasks of one). A worker stores them whenever it builds an environment
(training/envs/services.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from annotate.models import EnvironmentTools
from webapp.jobs import task_send

DESCRIBE_TASK = "environments.describe"  # training/tasks.py, sent by name


def environment_tools(name: str) -> list[dict] | None:
    """The tools a worker found in the environment called `name`, or None where none has said."""
    if not name:
        return None
    tools = EnvironmentTools.objects.filter(name=name).values_list("tools", flat=True).first()
    return tools if isinstance(tools, list) and tools else None


def environment_job_send(task_name: str, argument) -> None:
    """Send a job that starts an environment to a worker, by the task's name (annotate never
    imports the training app, whose tasks run them: training/tasks.py), on ENVIRONMENT_QUEUE."""
    task_send(task_name, argument, queue=settings.ENVIRONMENT_QUEUE)


def environments_describe_missing(names) -> list[str]:
    """Ask a worker (once the caller's transaction commits) to describe each named environment
    no worker has described yet. Returns the names asked for."""
    wanted = sorted({n for n in names if n} - set(EnvironmentTools.objects.values_list("name", flat=True)))
    for name in wanted:
        transaction.on_commit(lambda name=name: environment_job_send(DESCRIBE_TASK, name))
    return wanted
