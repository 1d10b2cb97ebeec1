from django.apps import AppConfig


class RewardmodelConfig(AppConfig):
    name = "rewardmodel"
    verbose_name = "Reward models"

    def ready(self) -> None:
        from rewardmodel.run_kinds import register_kinds

        register_kinds()
