from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Annotation"

    def ready(self) -> None:
        # Lazy: it imports models, which Django allows only once every app is loaded (ready() runs then).
        from annotate.registry import register

        register()
