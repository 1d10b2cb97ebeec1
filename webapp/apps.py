from django.apps import AppConfig
from django.urls import register_converter

from webapp.converters import IdConverter


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Arbiter core"

    def ready(self) -> None:
        register_converter(IdConverter, "id")
        # Lazy: it imports models, which Django allows only once every app is loaded (ready() runs then).
        from webapp.registry import register

        register()
