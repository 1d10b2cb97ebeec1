"""The core app's pages: health, sign-in and out, the caller's API tokens (arbiter/urls.py
mounts them at the root)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from webapp import views

urlpatterns = [
    path("health", views.health, name="health"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/<id:token_id>/revoke", views.token_revoke, name="token-revoke"),
]
