"""Users over REST (admins): list, create or invite, change email, roles and activity, passwords, tokens."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.access import api_role
from webapp.api import TokenListCreateApi, TokenRevokeApi
from webapp.api_input import WholeNumberField
from webapp.errors import ArbiterError
from webapp.pagination import ListPage, list_page
from webapp.roles import Role
from webapp.users.selectors import role_names, user_get, users_counted
from webapp.users.services import (
    EMAIL_MAX,
    PASSWORD_MAX,
    USERNAME_MAX,
    user_create,
    user_invite,
    user_password_reset_link,
    user_password_set,
    user_update,
)

User = get_user_model()
ROLES_HELP = "Exactly these roles: " + ", ".join(r.value for r in Role) + "."


def RolesField(**kwargs) -> serializers.ListField:
    allowed = ", ".join(r.value for r in Role)
    role = serializers.ChoiceField(
        choices=[r.value for r in Role],
        error_messages={"invalid_choice": f'"{{input}}" is not a role; the roles are {allowed}.'},
    )
    return serializers.ListField(child=role, max_length=len(Role) * 2, help_text=ROLES_HELP, **kwargs)


class UserOutput(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField(help_text="The roles the user holds (a superuser holds all).")
    judgements = WholeNumberField(source="judgement_count", help_text="Judgements the user has made.")
    tokens = WholeNumberField(source="token_count", help_text="API tokens the user has.")
    has_password = serializers.BooleanField(
        source="has_usable_password", help_text="False until an invited user sets their password."
    )

    class Meta:
        model = User
        fields = [
            "id",
            "username",
            "email",
            "roles",
            "is_active",
            "is_superuser",
            "is_synthetic",
            "has_password",
            "last_login",
            "date_joined",
            "judgements",
            "tokens",
        ]

    def get_roles(self, user) -> list[str]:
        return role_names(user)


def _output(user_id: int) -> dict:
    return UserOutput(user_get(user_id)).data


def _user(user_id: int):
    return get_object_or_404(User, pk=user_id)


class UserListCreateApi(APIView):
    """Every user; or a new one, who logs in with a password (given or generated) or sets it through a link."""

    permission_classes = [api_role(Role.ADMIN)]
    pagination_class = ListPage

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField(max_length=USERNAME_MAX)
        email = serializers.CharField(max_length=EMAIL_MAX, required=False, allow_blank=True, default="")
        roles = RolesField(required=False, default=list)
        password = serializers.CharField(
            max_length=PASSWORD_MAX,
            required=False,
            trim_whitespace=False,
            write_only=True,
            help_text="Leave out to have one generated.",
        )
        invite = serializers.BooleanField(
            required=False, default=False, help_text="No password: answer a one-time set-password link to share."
        )

    class CreatedSerializer(UserOutput):
        password = serializers.CharField(required=False, help_text="The generated password (shown once).")
        set_password_url = serializers.CharField(
            required=False, help_text="With invite: the one-time link where they set it."
        )

        class Meta(UserOutput.Meta):
            fields = [*UserOutput.Meta.fields, "password", "set_password_url"]

    @extend_schema(responses={200: UserOutput(many=True)})
    def get(self, request):
        return list_page(self, users_counted(), lambda page: UserOutput(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: CreatedSerializer})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        fields = {"username": d["username"], "email": d["email"], "roles": d["roles"]}
        extra = {}
        if d["invite"]:
            if "password" in d:
                raise ArbiterError("Send a password or invite: true, not both.")
            user, path = user_invite(**fields)
            extra["set_password_url"] = request.build_absolute_uri(path)
        else:
            user, password = user_create(**fields, password=d.get("password"))
            if "password" not in d:
                extra["password"] = password
        return Response({**_output(user.pk), **extra}, status=status.HTTP_201_CREATED)


class UserDetailApi(APIView):
    """One user; PATCH changes what it is sent (deactivate with is_active false: nothing is deleted)."""

    permission_classes = [api_role(Role.ADMIN)]

    class InputSerializer(serializers.Serializer):
        email = serializers.CharField(max_length=EMAIL_MAX, required=False, allow_blank=True)
        roles = RolesField(required=False)
        is_active = serializers.BooleanField(required=False)

    @extend_schema(responses={200: UserOutput})
    def get(self, request, user_id: int):
        return Response(_output(_user(user_id).pk))

    @extend_schema(request=InputSerializer, responses={200: UserOutput})
    def patch(self, request, user_id: int):
        user = _user(user_id)
        # partial: a form-encoded body without is_active must not read as is_active=false
        data = self.InputSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        if not data.validated_data:
            raise ArbiterError("Send at least one of email, roles and is_active.")
        user_update(actor=request.user, user=user, **data.validated_data)
        return Response(_output(user.pk))


class UserPasswordApi(APIView):
    """Set a user's password (checked by the site's password rules), or void it and answer a set-password link."""

    permission_classes = [api_role(Role.ADMIN)]

    class InputSerializer(serializers.Serializer):
        password = serializers.CharField(
            max_length=PASSWORD_MAX, required=False, trim_whitespace=False, write_only=True
        )
        link = serializers.BooleanField(
            required=False, default=False, help_text="Void the password and answer a one-time set-password link."
        )

    class OutputSerializer(serializers.Serializer):
        password_set = serializers.BooleanField()
        set_password_url = serializers.CharField(required=False, help_text="With link: where they set it.")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, user_id: int):
        user = _user(user_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        if d["link"] == ("password" in d):
            raise ArbiterError("Send either a password, or link: true for a set-password link.")
        if d["link"]:
            path = user_password_reset_link(user=user)
            return Response({"password_set": False, "set_password_url": request.build_absolute_uri(path)})
        user_password_set(user=user, password=d["password"])
        return Response({"password_set": True})


class UserTokenCreateInput(TokenListCreateApi.InputSerializer):
    """The same body as the caller's own tokens, documented under the team API's name."""


@extend_schema_view(
    post=extend_schema(request=UserTokenCreateInput, responses={201: TokenListCreateApi.CreatedSerializer})
)
class UserTokenListCreateApi(TokenListCreateApi):
    """A user's API tokens; or a new one for them (its key is in this answer only)."""

    permission_classes = [api_role(Role.ADMIN)]

    def owner(self, request, *, user_id: int):
        return _user(user_id)


class UserTokenRevokeApi(TokenRevokeApi):
    """Revoke one of a user's tokens; it stops working at once."""

    permission_classes = [api_role(Role.ADMIN)]

    def owner(self, request, *, user_id: int):
        return _user(user_id)
