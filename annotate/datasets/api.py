"""Dataset snapshots over REST (researchers and admins)."""

from __future__ import annotations

from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.export_schemas import FILETYPES, FORMATS
from annotate.exports import export_download_path
from annotate.models import Campaign, DatasetSnapshot
from annotate.services.datasets import snapshot_create_from_input
from webapp.access import api_role
from webapp.api_input import IdField, Int32Field
from webapp.errors import ArbiterError
from webapp.pagination import ListPage, list_page
from webapp.roles import Role

DATA_ROLES = (Role.RESEARCHER, Role.ADMIN)


class SnapshotOutput(serializers.ModelSerializer):
    campaigns = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = DatasetSnapshot
        fields = [
            "id",
            "name",
            "description",
            "campaigns",
            "filters",
            "aggregation",
            "ties",
            "seed",
            "test_fraction",
            "status",
            "progress",
            "message",
            "content_hash",
            "stats",
            "created_at",
        ]


class DatasetListCreateApi(APIView):
    permission_classes = [api_role(*DATA_ROLES)]
    pagination_class = ListPage

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="", max_length=20_000)
        campaigns = serializers.ListField(child=IdField(), min_length=1, max_length=1000)
        min_votes = Int32Field(min_value=1, max_value=1000, default=1)
        min_agreement = serializers.FloatField(min_value=0, max_value=1, default=0.0)
        include_synthetic = serializers.BooleanField(default=False)
        feedback = serializers.ChoiceField(
            choices=["human", "ai", "both"],
            default="human",
            help_text="Whose votes, in the words of the files' `source` column: human (annotators: people, and "
            "simulated annotators with include_synthetic; the default), ai (judges: AI feedback), or both kept apart. "
            "Each row's `labelled_by` says who labelled it: people, simulated, mixed or judge.",
        )
        judges = serializers.ListField(
            child=IdField(), required=False, default=list, max_length=100, help_text="Which judges (default: all)."
        )
        date_from = serializers.DateField(required=False, allow_null=True, default=None)
        date_to = serializers.DateField(required=False, allow_null=True, default=None)
        aggregation = serializers.ChoiceField(choices=["majority", "mean"], default="majority")
        ties = serializers.ChoiceField(choices=["keep", "drop"], default="keep")
        seed = Int32Field(default=0)
        test_fraction = serializers.FloatField(min_value=0, max_value=0.95, default=0.2)

    @extend_schema(responses={200: SnapshotOutput(many=True)})
    def get(self, request):
        return list_page(
            self,
            DatasetSnapshot.objects.prefetch_related("campaigns"),
            lambda page: SnapshotOutput(page, many=True).data,
        )

    @extend_schema(request=InputSerializer, responses={201: SnapshotOutput, 202: SnapshotOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        campaigns = list(Campaign.objects.filter(pk__in=d["campaigns"]))
        missing = sorted(set(d["campaigns"]) - {c.pk for c in campaigns})
        if missing:
            raise ArbiterError(f"No campaign with id {', '.join(map(str, missing))}.")
        snapshot = snapshot_create_from_input(data=d, campaigns=campaigns, created_by=request.user)
        code = (
            status.HTTP_201_CREATED if snapshot.status == DatasetSnapshot.Status.SUCCEEDED else status.HTTP_202_ACCEPTED
        )
        return Response(SnapshotOutput(snapshot).data, status=code)


class DatasetDetailApi(APIView):
    permission_classes = [api_role(*DATA_ROLES)]

    @extend_schema(responses={200: SnapshotOutput})
    def get(self, request, snapshot_id: int):
        return Response(SnapshotOutput(get_object_or_404(DatasetSnapshot, pk=snapshot_id)).data)


class DatasetDownloadApi(APIView):
    """The zipped bundle: dataset card, manifest, data/train and data/test."""

    permission_classes = [api_role(*DATA_ROLES)]

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS)),
            OpenApiParameter("filetype", str, enum=list(FILETYPES)),
        ],
        responses={(200, "application/zip"): bytes},
    )
    def get(self, request, snapshot_id: int):
        snapshot = get_object_or_404(DatasetSnapshot, pk=snapshot_id)
        fmt = request.query_params.get("format", "trl")
        filetype = request.query_params.get("filetype", "parquet")
        path = export_download_path(snapshot, fmt, filetype)
        return FileResponse(
            path.open("rb"),
            as_attachment=True,
            content_type="application/zip",
            filename=f"arbiter-snapshot-{snapshot.pk}-{fmt}-{filetype}.zip",
        )
