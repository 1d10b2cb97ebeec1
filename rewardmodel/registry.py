"""What the reward-model app adds to the project's registries once Django is ready (apps.py): the
run forms' picker of reward models, and its run kinds."""

from __future__ import annotations

from rewardmodel.models import RewardModel
from rewardmodel.run_kinds import register_kinds
from webapp.runs.forms import picker_register


def _reward_models():
    return [(m.pk, str(m)) for m in RewardModel.objects.order_by("-created_at")[:300]]


def register() -> None:
    picker_register(r"(^|_)reward_model_id$", _reward_models)
    register_kinds()
