"""The Users pages (admins), and the set-password link that invitations and resets hand out (anyone with it).

Included under /team/. The two password routes carry Django's own names
(`password_reset_confirm`, `password_reset_complete`), so its views find them.
"""

from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.users import views

urlpatterns = [
    path("users/", views.users, name="team-users"),
    path("users/<id:user_id>/", views.user_detail, name="team-user"),
    path("users/<id:user_id>/edit", views.user_edit_post, name="team-user-edit"),
    path("users/<id:user_id>/deactivate", views.user_deactivate_post, name="team-user-deactivate"),
    path("users/<id:user_id>/reactivate", views.user_reactivate_post, name="team-user-reactivate"),
    path("users/<id:user_id>/password", views.user_password_post, name="team-user-password"),
    path("users/<id:user_id>/tokens", views.user_token_create_post, name="team-user-tokens"),
    path("users/<id:user_id>/tokens/<id:token_id>/revoke", views.user_token_revoke_post, name="team-user-token-revoke"),
    path("password/<uidb64>/<token>/", views.PasswordSetView.as_view(), name="password_reset_confirm"),
    path("password/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
]
