"""REST endpoints of the annotation app: one view per operation, thin."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Campaign, ImportBatch
from annotate.services.imports import (
    import_batches_fail_stale,
    import_upload_create,
    trajectories_import_objects,
)
from webapp.access import api_role
from webapp.errors import ArbiterError
from webapp.roles import Role


def _campaign_from(value) -> Campaign | None:
    if value in (None, ""):
        return None
    try:
        return Campaign.objects.get(pk=int(value))
    except (ValueError, TypeError, Campaign.DoesNotExist):
        raise ArbiterError(f"No campaign with id {value!r}.") from None


class ImportBatchOutput(serializers.ModelSerializer):
    class Meta:
        model = ImportBatch
        fields = [
            "id", "filename", "size_bytes", "campaign", "status", "lines_read", "created_count",
            "duplicate_count", "comparisons_created", "error_count", "errors", "message",
            "created_at", "updated_at",
        ]


class TrajectoryImportApi(APIView):
    """Import trajectories posted as JSON: one object or a list, canonical v1 or OpenAI chat."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [JSONParser]

    class OutputSerializer(serializers.Serializer):
        created = serializers.IntegerField()
        duplicates = serializers.IntegerField()
        comparisons_created = serializers.IntegerField()
        trajectory_ids = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(
        parameters=[OpenApiParameter("campaign", int, description="Build comparisons in this campaign")],
        request={"application/json": {"oneOf": [{"type": "object"}, {"type": "array"}]}},
        responses={201: OutputSerializer},
    )
    def post(self, request):
        campaign = _campaign_from(request.query_params.get("campaign"))
        body = request.data
        if isinstance(body, dict):
            body = [body]
        if not isinstance(body, list):
            raise ArbiterError("Send one trajectory object or a list of them.")
        report = trajectories_import_objects(objects=body, campaign=campaign)
        out = self.OutputSerializer(
            {
                "created": report.created,
                "duplicates": report.duplicates,
                "comparisons_created": report.comparisons_created,
                "trajectory_ids": report.trajectory_ids,
            }
        )
        return Response(out.data, status=status.HTTP_201_CREATED)


class ImportUploadApi(APIView):
    """Upload a JSONL file. Small files are imported at once (201), large ones by a job (202)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()
        campaign = serializers.IntegerField(required=False)

    @extend_schema(request=InputSerializer, responses={201: ImportBatchOutput, 202: ImportBatchOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        campaign = _campaign_from(data.validated_data.get("campaign"))
        batch = import_upload_create(
            upload=data.validated_data["file"], campaign=campaign, created_by=request.user
        )
        code = status.HTTP_202_ACCEPTED if not batch.finished else (
            status.HTTP_201_CREATED if batch.status == ImportBatch.Status.SUCCEEDED
            else status.HTTP_400_BAD_REQUEST
        )
        return Response(ImportBatchOutput(batch).data, status=code)


class ImportDetailApi(APIView):
    """An import's status, counts and the reasons for any bad lines."""

    permission_classes = [api_role(Role.ADMIN)]

    @extend_schema(responses={200: ImportBatchOutput})
    def get(self, request, batch_id: int):
        import_batches_fail_stale()
        return Response(ImportBatchOutput(get_object_or_404(ImportBatch, pk=batch_id)).data)
