from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"

    def ready(self) -> None:
        from training.run_kinds import register_kinds

        register_kinds()
