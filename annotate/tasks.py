"""Celery tasks of the annotation app: thin, they load by id and call one service."""

from __future__ import annotations

from celery import shared_task

from annotate.services.imports import import_batch_run


# An import of the largest allowed file takes minutes; an hour is a hard ceiling.
@shared_task(name="annotate.import_batch", acks_late=True, time_limit=3600, soft_time_limit=3500)
def import_batch_task(batch_id: int) -> None:
    import_batch_run(batch_id=batch_id)


# A snapshot of a million judgements takes minutes; half an hour is a hard ceiling.
@shared_task(name="annotate.snapshot_build", acks_late=True, time_limit=1800, soft_time_limit=1750)
def snapshot_build_task(snapshot_id: int) -> None:
    from annotate.services.datasets import snapshot_build

    snapshot_build(snapshot_id=snapshot_id)


# A fill of a million trajectories takes minutes; half an hour is a hard ceiling.
@shared_task(name="annotate.campaign_fill", acks_late=True, time_limit=1800, soft_time_limit=1750)
def campaign_fill_task(fill_id: int) -> None:
    from annotate.services.campaign_fill import campaign_fill_run

    campaign_fill_run(fill_id=fill_id)
