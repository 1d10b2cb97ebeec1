"""Corrections over REST: an annotator corrects a side of the comparison they hold or judged;
researchers and admins list and read corrections with their lineage; admins review them.
The services check everything (annotate/services/corrections.py); this module shapes input
and output."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Correction
from annotate.services.corrections import MAX_BODY_BYTES, correction_review, correction_submit, replay_state
from core.problems import problem
from webapp.access import api_role
from webapp.api_input import StrictJSONParser, WholeNumberField, id_parameter, query_id
from webapp.errors import ArbiterError
from webapp.models import pseudonym_for
from webapp.pagination import ListPage, list_page
from webapp.roles import Role
from webapp.uploads import body_too_big

LABELERS = (Role.ANNOTATOR, Role.ADMIN)
READERS = (Role.RESEARCHER, Role.ADMIN)


class CorrectionOutput(serializers.ModelSerializer):
    steps = serializers.JSONField(source="corrected.steps", help_text="The corrected trajectory's steps.")
    answer = serializers.CharField(source="corrected.answer")
    outcome = serializers.JSONField(source="corrected.outcome", help_text="The rubric's, where it was replayed.")
    task = serializers.CharField(source="original.task.external_id")
    author = serializers.SerializerMethodField(help_text="Pseudonym.")
    replay = serializers.SerializerMethodField(
        help_text="How it was made: state queued or running (a worker plays it in its task's environment), "
        "replayed, stored as edited (note: why), or failed (note: the reason; stored as edited)."
    )

    class Meta:
        model = Correction
        fields = [
            "id",
            "original",
            "corrected",
            "comparison",
            "task",
            "author",
            "kind",
            "step",
            "replayed",
            "replay",
            "status",
            "reviewed_at",
            "review_note",
            "steps",
            "answer",
            "outcome",
            "created_at",
        ]

    def get_author(self, correction) -> str:

        return pseudonym_for(correction.author_id)

    def get_replay(self, correction) -> dict:
        state, note = replay_state(correction)
        return {"state": state, "note": note}


class CorrectionInput(serializers.Serializer):
    """For the schema only: `correction_parse` reads the body."""

    side = serializers.ChoiceField(choices=["left", "right"], help_text="The side of the screen to correct.")
    kind = serializers.ChoiceField(choices=Correction.Kind.choices)
    step = WholeNumberField(
        required=False,
        min_value=0,
        max_value=2**31 - 1,
        help_text="tool_call: a tool call step (replaced) or the answer step (calls go before it).",
    )
    calls = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="[{tool, arguments, observation?}]"
    )
    answer = serializers.CharField(required=False, allow_blank=True)


class CorrectionCreated(CorrectionOutput):
    """What the annotator who made it reads back: never the rubric's outcome (annotators never see
    the known answer's verdict)."""

    note = serializers.SerializerMethodField(help_text="Why it was stored as edited and not replayed, if so.")

    class Meta(CorrectionOutput.Meta):
        fields = [*(f for f in CorrectionOutput.Meta.fields if f != "outcome"), "note"]

    def get_note(self, correction) -> str:
        return self.context.get("note", "")


class AssignmentCorrectionApi(APIView):
    """Correct one side of the comparison you hold or judged (after or instead of a verdict)."""

    permission_classes = [api_role(*LABELERS)]
    parser_classes = [StrictJSONParser]

    @extend_schema(request=CorrectionInput, responses={201: CorrectionCreated})
    def post(self, request, assignment_id: int):
        body_too_big(request, MAX_BODY_BYTES, "a correction")
        correction, note = correction_submit(assignment_id=assignment_id, annotator=request.user, body=request.data)
        return Response(CorrectionCreated(correction, context={"note": note}).data, status=status.HTTP_201_CREATED)


STATUS_PARAM = OpenApiParameter("status", str, enum=list(Correction.Status.values), description="Only these.")


class CorrectionListApi(APIView):
    """Corrections, newest first (researchers and admins), by status or campaign."""

    permission_classes = [api_role(*READERS)]
    pagination_class = ListPage

    @extend_schema(parameters=[STATUS_PARAM, id_parameter("campaign")], responses={200: CorrectionOutput(many=True)})
    def get(self, request):
        rows = Correction.objects.select_related("corrected", "original__task", "replay")
        wanted = request.query_params.get("status")
        if wanted is not None:
            if wanted not in Correction.Status.values:
                raise ArbiterError(
                    f"status: one of {', '.join(Correction.Status.values)}.",
                    details=[problem("unknown status", field="status")],
                )
            rows = rows.filter(status=wanted)
        campaign = query_id(request, "campaign")
        if campaign is not None:
            rows = rows.filter(comparison__campaign_id=campaign)
        return list_page(self, rows, lambda page: CorrectionOutput(page, many=True).data)


class CorrectionDetailApi(APIView):
    permission_classes = [api_role(*READERS)]

    @extend_schema(responses={200: CorrectionOutput})
    def get(self, request, correction_id: int):
        return Response(CorrectionOutput(get_object_or_404(Correction, pk=correction_id)).data)


class CorrectionReviewApi(APIView):
    """Accept or reject a correction (admins): only accepted ones go into datasets."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=["accept", "reject"])
        note = serializers.CharField(required=False, allow_blank=True, default="", max_length=20_000)

    @extend_schema(request=InputSerializer, responses={200: CorrectionOutput})
    def post(self, request, correction_id: int):
        correction = get_object_or_404(Correction, pk=correction_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reviewed = correction_review(
            correction=correction,
            decision=data.validated_data["decision"],
            reviewer=request.user,
            note=data.validated_data["note"],
        )
        return Response(CorrectionOutput(reviewed).data)
