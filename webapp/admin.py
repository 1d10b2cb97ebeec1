from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from webapp.models import ApiToken, User


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    list_display = ("username", "email", "is_synthetic", "is_staff", "is_active")
    list_filter = ("groups", "is_synthetic", "is_staff", "is_active")
    fieldsets = BaseUserAdmin.fieldsets + (("Arbiter", {"fields": ("is_synthetic",)}),)

    # Nobody is deleted (docs/team.md), and an admin cannot raise themselves, or anyone, to
    # superuser or grant raw permissions: roles are given on the Team pages.
    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        readonly = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            readonly += ["is_superuser", "is_staff", "user_permissions", "groups"]
        return readonly


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created by their user (their Tokens page); here an admin sees and revokes them."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at")
    list_filter = ("user",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("user", "name", "prefix", "key_hash", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False
