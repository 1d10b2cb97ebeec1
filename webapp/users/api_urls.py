"""The Users API (admins), included under /api/v1/users/."""

from django.urls import path

from webapp.users import api

urlpatterns = [
    path("", api.UserListCreateApi.as_view(), name="api-users"),
    path("<id:user_id>", api.UserDetailApi.as_view(), name="api-user"),
    path("<id:user_id>/password", api.UserPasswordApi.as_view(), name="api-user-password"),
    path("<id:user_id>/tokens", api.UserTokenListCreateApi.as_view(), name="api-user-tokens"),
    path("<id:user_id>/tokens/<id:token_id>", api.UserTokenRevokeApi.as_view(), name="api-user-token"),
]
