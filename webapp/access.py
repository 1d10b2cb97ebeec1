"""Role checks for views and API routes."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from webapp.roles import Role, user_has_role


def role_required(*roles: Role):
    """View decorator: anonymous users go to the login page, other roles get a 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not user_has_role(request.user, *roles):
                needed = " or ".join(r.value for r in roles)
                raise PermissionDenied(
                    f"This page is for the {needed} role{'s' if len(roles) > 1 else ''}; yours does not include it."
                )
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def api_role(*roles: Role) -> type[BasePermission]:
    """A DRF permission class that admits authenticated users holding any of `roles`."""

    class HasRole(BasePermission):
        message = f"This needs the {' or '.join(r.value for r in roles)} role."

        def has_permission(self, request, view) -> bool:
            return bool(request.user and request.user.is_authenticated) and user_has_role(request.user, *roles)

    HasRole.__name__ = "Has" + "Or".join(r.value.capitalize() for r in roles) + "Role"
    return HasRole
