"""Comparisons written by COPY and INSERT ... SELECT (PostgreSQL) carry every column as the ORM
would write it, skip stored pairs, and refuse a model column with no default."""

import pytest
from django.db import models, transaction

from annotate.models import Comparison
from annotate.services.comparisons import comparisons_insert
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory
from webapp.db import insert_new_rows

pytestmark = pytest.mark.django_db

_SET_BY_THE_DATABASE_OR_THE_CLOCK = {"id", "created_at", "updated_at", "trajectory_a_id", "trajectory_b_id", "task_id"}


def _pairs(n: int) -> list[tuple[int, int, int]]:
    pairs = []
    for _ in range(n):
        task = TaskFactory()
        a, b = sorted([TrajectoryFactory(task=task).id, TrajectoryFactory(task=task).id])
        pairs.append((task.id, a, b))
    return pairs


def test_copied_comparisons_have_the_orms_columns_and_stored_pairs_are_skipped():
    campaign = CampaignFactory()
    pairs = _pairs(4)
    by_orm = Comparison.objects.create(
        campaign=campaign, task_id=pairs[0][0], trajectory_a_id=pairs[0][1], trajectory_b_id=pairs[0][2]
    )
    created = comparisons_insert(campaign=campaign, pairs=pairs + pairs[1:2])  # one stored, one repeated
    assert created == 3
    assert Comparison.objects.filter(campaign=campaign).count() == 4
    columns = [
        f.attname for f in Comparison._meta.concrete_fields if f.attname not in _SET_BY_THE_DATABASE_OR_THE_CLOCK
    ]
    expected = {name: getattr(by_orm, name) for name in columns}
    for copied in Comparison.objects.filter(campaign=campaign).exclude(pk=by_orm.pk):
        assert {name: getattr(copied, name) for name in columns} == expected
        assert copied.created_at is not None and copied.updated_at is not None
    assert comparisons_insert(campaign=campaign, pairs=pairs) == 0  # idempotent


def test_a_column_without_a_default_must_be_given():
    class NoDefault(models.Model):  # never migrated: the check comes before any statement
        required = models.IntegerField()
        other = models.IntegerField(default=0)

        class Meta:
            app_label = "annotate"
            managed = False

    try:
        with transaction.atomic(), pytest.raises(ValueError, match="required has no default"):
            insert_new_rows(NoDefault, ("other",), [(1,)], constants={}, conflict=("other",))
    finally:  # out of the app registry again: later tests of this process list every model
        from django.apps import apps

        apps.all_models["annotate"].pop("nodefault", None)
        apps.clear_cache()
