"""Celery tasks of the annotation app: thin, they load by id and call one service."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_init

from annotate.export_copy import export_libraries_load
from annotate.exports import snapshot_bundle_prepare
from annotate.services.campaign_fill import campaign_fill_run
from annotate.services.datasets import snapshot_build
from annotate.services.imports import import_batch_run


@worker_init.connect
def export_libraries_load_at_start(**kwargs) -> None:
    """Once per worker, before it takes a task (a prefork worker's children inherit it): what
    the first export of the process would load (pandas through pyarrow: 0.3-1.4 s)."""
    export_libraries_load()


# An import of the largest allowed file takes minutes; an hour is a hard ceiling.
@shared_task(name="annotate.import_batch", acks_late=True, time_limit=3600, soft_time_limit=3500)
def import_batch_task(batch_id: int) -> None:
    import_batch_run(batch_id=batch_id)


# A snapshot of a million judgements takes minutes; half an hour is a hard ceiling.
@shared_task(name="annotate.snapshot_build", acks_late=True, time_limit=1800, soft_time_limit=1750)
def snapshot_build_task(snapshot_id: int) -> None:
    snapshot_build(snapshot_id=snapshot_id)


# The default bundle of a million judgements takes minutes (an export); half an hour is a hard ceiling.
@shared_task(name="annotate.snapshot_bundle", acks_late=True, time_limit=1800, soft_time_limit=1750)
def snapshot_bundle_task(snapshot_id: int) -> None:
    snapshot_bundle_prepare(snapshot_id=snapshot_id)


# A fill of a million trajectories takes minutes; half an hour is a hard ceiling.
@shared_task(name="annotate.campaign_fill", acks_late=True, time_limit=1800, soft_time_limit=1750)
def campaign_fill_task(fill_id: int) -> None:
    campaign_fill_run(fill_id=fill_id)
