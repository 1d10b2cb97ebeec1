"""Core REST endpoints."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.models import ApiToken
from webapp.pagination import ListPage, list_page
from webapp.roles import user_roles
from webapp.tokens import api_token_create, api_token_revoke, api_tokens_of


class WhoAmIApi(APIView):
    """The caller's username and roles: lets a script check its token."""

    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        roles = serializers.ListField(child=serializers.CharField())

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request):
        return Response({"username": request.user.username, "roles": sorted(r.value for r in user_roles(request.user))})


class TokenOutput(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at"]


class TokenListCreateApi(APIView):
    """The caller's own API tokens: list them, or create one (its key is in this answer only).
    The team API's tokens of a user (webapp/users/api.py) are this view with another owner."""

    pagination_class = ListPage

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)

    class CreatedSerializer(TokenOutput):
        key = serializers.CharField(help_text="The token itself; it is not stored and never shown again.")

        class Meta(TokenOutput.Meta):
            fields = [*TokenOutput.Meta.fields, "key"]

    def owner(self, request, **url):
        """Whose tokens: the caller's."""
        return request.user

    @extend_schema(responses={200: TokenOutput(many=True)})
    def get(self, request, **url):
        return list_page(
            self, api_tokens_of(self.owner(request, **url)), lambda page: TokenOutput(page, many=True).data
        )

    @extend_schema(request=InputSerializer, responses={201: CreatedSerializer})
    def post(self, request, **url):
        user = self.owner(request, **url)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, key = api_token_create(user=user, name=data.validated_data["name"], by=request.user)
        token.key = key
        return Response(self.CreatedSerializer(token).data, status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    """Revoke one of the caller's tokens; it stops working at once."""

    def owner(self, request, **url):
        return request.user

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, token_id: int, **url):
        user = self.owner(request, **url)
        if not api_token_revoke(user=user, token_id=token_id):
            whose = "You have" if user.pk == request.user.pk else f"{user.username} has"
            raise NotFound(f"{whose} no token with id {token_id}.")
        return Response(status=status.HTTP_204_NO_CONTENT)
