from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_roles(sender, **kwargs) -> None:
    from webapp.roles import roles_sync

    roles_sync()


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Arbiter core"

    def ready(self) -> None:
        from django.urls import register_converter

        from webapp.converters import IdConverter

        register_converter(IdConverter, "id")
        # Once per migrate run: after the last app's permissions exist.
        post_migrate.connect(_sync_roles, dispatch_uid="webapp.roles_sync")
