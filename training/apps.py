from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"

    def ready(self) -> None:
        from annotate.services.corrections import replayer_register
        from training.envs.replay import EnvironmentReplayer
        from training.run_kinds import register_kinds

        register_kinds()
        replayer_register(EnvironmentReplayer())  # corrections run in their task's environment
