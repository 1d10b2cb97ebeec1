from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from webapp.models import User


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    list_display = ("username", "email", "is_synthetic", "is_staff", "is_active")
    list_filter = ("groups", "is_synthetic", "is_staff", "is_active")
    fieldsets = BaseUserAdmin.fieldsets + (("Arbiter", {"fields": ("is_synthetic",)}),)
