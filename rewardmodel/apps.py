from django.apps import AppConfig


class RewardmodelConfig(AppConfig):
    name = "rewardmodel"
    verbose_name = "Reward models"

    def ready(self) -> None:
        # Lazy: it imports models, which Django allows only once every app is loaded (ready() runs then).
        from rewardmodel.registry import register

        register()
