"""Core REST endpoints."""
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.roles import user_roles


class WhoAmIApi(APIView):
    """The caller's username and roles: lets a script check its token."""

    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        roles = serializers.ListField(child=serializers.CharField())

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request):
        return Response({"username": request.user.username, "roles": sorted(r.value for r in user_roles(request.user))})
