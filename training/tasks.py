"""Celery tasks that start an environment outside a run (the web process never starts one):
thin, they call one service. Sent by name to settings.ENVIRONMENT_QUEUE."""

from __future__ import annotations

from celery import shared_task

from annotate.services.corrections import correction_replay_run
from training.envs.replay import EnvironmentReplayer
from training.envs.services import environment_describe


# A replay plays at most MAX_CALLS calls (each bounded by its environment's own timeout) after the original's steps.
@shared_task(name="environments.correction_replay", acks_late=True, time_limit=900, soft_time_limit=870)
def correction_replay_task(job_id: int) -> None:

    correction_replay_run(job_id=job_id, replayer=EnvironmentReplayer())


@shared_task(name="environments.describe", acks_late=True, time_limit=600, soft_time_limit=570)
def environment_describe_task(name: str) -> None:

    environment_describe(name)
