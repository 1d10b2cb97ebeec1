from django.apps import AppConfig


def _reward_models():
    from rewardmodel.models import RewardModel

    return [(m.pk, str(m)) for m in RewardModel.objects.order_by("-created_at")[:300]]


class RewardmodelConfig(AppConfig):
    name = "rewardmodel"
    verbose_name = "Reward models"

    def ready(self) -> None:
        from rewardmodel.run_kinds import register_kinds
        from webapp.runs.forms import picker_register

        picker_register(r"(^|_)reward_model_id$", _reward_models)

        register_kinds()
