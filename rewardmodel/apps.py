from django.apps import AppConfig


class RewardmodelConfig(AppConfig):
    name = "rewardmodel"
