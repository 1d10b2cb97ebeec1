from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"

    def ready(self) -> None:
        # Lazy: the run kinds import models, which Django allows only once every app is loaded (ready() runs then).
        from training.run_kinds import register_kinds

        register_kinds()
