"""Judges over REST: list and read them (researchers and admins), create, edit and delete them
and read their audit log (admins); a campaign's judge votes and agreement (researchers and
admins) and its disagreement-first ordering (admins). A judge votes through a run:
`POST /api/v1/runs/` with kind `judge` (docs/judges.md).

A chat judge's key is write-only: `api_key` on create or edit; reads say only where the key
comes from (`api_key_source`: stored, env:NAME or none).
"""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.judges.quality import campaign_judge_panels
from annotate.judges.votes import ORDERINGS, campaign_order
from annotate.models import Campaign, Judge, JudgeCall, JudgeVote
from training.judges.services import judge_create, judge_delete, judge_key_source, judge_update
from webapp.access import api_role
from webapp.api_input import IdField, StrictJSONParser, WholeNumberField, id_parameter, query_id
from webapp.pagination import ListPage, OldestFirstListPage, list_page
from webapp.roles import Role, user_has_role

READERS = (Role.RESEARCHER, Role.ADMIN)


class JudgeOutput(serializers.ModelSerializer):
    config = serializers.JSONField(help_text="What the kind needs (never a key).")
    api_key_source = serializers.SerializerMethodField(help_text="Where a chat judge's key comes from.")
    votes = serializers.SerializerMethodField(help_text="First answers stored, over every campaign.")

    class Meta:
        model = Judge
        fields = ["id", "name", "kind", "description", "config", "api_key_source", "votes", "created_at", "updated_at"]

    def get_api_key_source(self, judge) -> str:
        return judge_key_source(judge)

    def get_votes(self, judge) -> int:
        return JudgeVote.objects.filter(judge=judge, probe=JudgeVote.Probe.FIRST).count()


class JudgeInput(serializers.Serializer):
    """For the schema: the service checks the fields (training/judges/services.py)."""

    name = serializers.CharField(max_length=200, required=False)
    kind = serializers.ChoiceField(choices=Judge.Kind.choices, required=False, help_text="On create only.")
    description = serializers.CharField(required=False, allow_blank=True)
    config = serializers.JSONField(
        required=False,
        help_text="reward_model: {reward_model_id}; rubric: {}; chat: {base_url, model, api_key_env, temperature, "
        "timeout_s, concurrency, requests_per_minute, max_retries, backoff_s, max_tokens, structured_output, "
        "price_input_per_mtok, price_output_per_mtok, max_cost_usd, max_failures_in_a_row}.",
    )
    api_key = serializers.CharField(required=False, allow_blank=True, write_only=True, help_text="Write-only.")


def _admin_only(request) -> None:
    if not user_has_role(request.user, Role.ADMIN):
        from rest_framework.exceptions import PermissionDenied

        raise PermissionDenied("This needs the admin role.")


class JudgeListCreateApi(APIView):
    """Judges, newest first (researchers and admins); create one (admins)."""

    permission_classes = [api_role(*READERS)]
    parser_classes = [StrictJSONParser]
    pagination_class = ListPage

    @extend_schema(responses={200: JudgeOutput(many=True)})
    def get(self, request):
        return list_page(self, Judge.objects.all(), lambda page: JudgeOutput(page, many=True).data)

    @extend_schema(request=JudgeInput, responses={201: JudgeOutput})
    def post(self, request):
        _admin_only(request)
        judge = judge_create(data=request.data, created_by=request.user)
        return Response(JudgeOutput(judge).data, status=status.HTTP_201_CREATED)


class JudgeDetailApi(APIView):
    """One judge (researchers and admins); edit or delete it (admins; a judge with votes is kept)."""

    permission_classes = [api_role(*READERS)]
    parser_classes = [StrictJSONParser]

    @extend_schema(responses={200: JudgeOutput})
    def get(self, request, judge_id: int):
        return Response(JudgeOutput(get_object_or_404(Judge, pk=judge_id)).data)

    @extend_schema(request=JudgeInput, responses={200: JudgeOutput})
    def patch(self, request, judge_id: int):
        _admin_only(request)
        judge = judge_update(judge=get_object_or_404(Judge, pk=judge_id), data=request.data)
        return Response(JudgeOutput(judge).data)

    @extend_schema(responses={204: None})
    def delete(self, request, judge_id: int):
        _admin_only(request)
        judge_delete(judge=get_object_or_404(Judge, pk=judge_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class JudgeCallOutput(serializers.ModelSerializer):
    request = serializers.JSONField(help_text="The body sent (never the key).")

    class Meta:
        model = JudgeCall
        fields = [
            "id",
            "run",
            "comparison",
            "probe",
            "attempt",
            "status",
            "http_status",
            "error",
            "structured_output",
            "request",
            "response",
            "latency_s",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "created_at",
        ]


RUN_PARAM = id_parameter("run", description="Only the calls of this run.")


class JudgeCallsApi(APIView):
    """A chat judge's audit log: every request and what came back, newest first (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    pagination_class = ListPage

    @extend_schema(parameters=[RUN_PARAM], responses={200: JudgeCallOutput(many=True)})
    def get(self, request, judge_id: int):
        judge = get_object_or_404(Judge, pk=judge_id)
        rows = JudgeCall.objects.filter(judge=judge)
        run = query_id(request, "run")
        if run is not None:
            rows = rows.filter(run_id=run)
        return list_page(self, rows, lambda page: JudgeCallOutput(page, many=True).data)


class JudgeVoteOutput(serializers.ModelSerializer):
    judge_name = serializers.CharField(source="judge.name")
    ratings = serializers.JSONField()

    class Meta:
        model = JudgeVote
        fields = [
            "id",
            "judge",
            "judge_name",
            "comparison",
            "run",
            "probe",
            "choice",
            "both_bad",
            "ratings",
            "first_wrong_step_a",
            "first_wrong_step_b",
            "rationale",
            "probability_a",
            "counted",
            "created_at",
        ]


class CampaignJudgeVotesApi(APIView):
    """A campaign's judge votes and probes, in the order they were stored (researchers and admins)."""

    permission_classes = [api_role(*READERS)]
    pagination_class = OldestFirstListPage

    @extend_schema(responses={200: JudgeVoteOutput(many=True)})
    def get(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        rows = JudgeVote.objects.filter(comparison__campaign=campaign).select_related("judge")
        return list_page(self, rows, lambda page: JudgeVoteOutput(page, many=True).data)


class IntervalOut(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)


class FiguresOut(serializers.Serializer):
    n = WholeNumberField(help_text="Comparisons counted.")
    accuracy = IntervalOut()
    kappa = IntervalOut(help_text="Cohen's kappa over A / tie / B.")


class WeekOut(serializers.Serializer):
    week = serializers.CharField(help_text="ISO week of the latest human vote on the comparison.")
    figures = FiguresOut()


class DimensionOut(serializers.Serializer):
    dimension = serializers.CharField(help_text="overall (the verdict) or a rating dimension.")
    vs_humans = FiguresOut(help_text="The judge against the human majority.")
    ceiling = FiguresOut(help_text="Each person against the majority of the others (leave-one-out).")
    judge_on_ceiling = FiguresOut(help_text="The judge on the comparisons the ceiling used.")
    by_week = WeekOut(many=True)


class PositionBiasOut(serializers.Serializer):
    n = WholeNumberField()
    flip_rate = IntervalOut(help_text="Share of answers that changed side when the sides were swapped.")
    first_shown_n = WholeNumberField()
    first_shown_rate = IntervalOut(help_text="Share of non-tie answers for the side shown first (0.5: none).")


class SelfConsistencyOut(serializers.Serializer):
    n = WholeNumberField()
    agreement = IntervalOut()
    kappa = IntervalOut()


class JudgePanelOut(serializers.Serializer):
    judge_id = WholeNumberField()
    name = serializers.CharField()
    kind = serializers.CharField()
    answered = WholeNumberField(help_text="Comparisons the judge answered.")
    counted = WholeNumberField(help_text="Of them, votes counted toward k.")
    dimensions = DimensionOut(many=True)
    position_bias = PositionBiasOut()
    self_consistency = SelfConsistencyOut()


class CampaignJudgeAgreementApi(APIView):
    """Each judge against people on a campaign, with 95% bootstrap intervals (researchers and admins)."""

    permission_classes = [api_role(*READERS)]

    class OutputSerializer(serializers.Serializer):
        campaign = WholeNumberField()
        judges = JudgePanelOut(many=True)

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        panels = [asdict(p) for p in campaign_judge_panels(campaign=campaign)]
        return Response({"campaign": campaign.pk, "judges": JudgePanelOut(panels, many=True).data})


class CampaignOrderApi(APIView):
    """Order a campaign's queue: `disagreement_first` (what the judges dispute or the reward
    model is unsure of goes to people first) or `none` (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        ordering = serializers.ChoiceField(choices=ORDERINGS)
        judges = serializers.ListField(
            child=IdField(),
            required=False,
            max_length=100,
            help_text="Only these judges' votes (default: every judge's).",
        )

    class OutputSerializer(serializers.Serializer):
        ordering = serializers.CharField()
        ordered = WholeNumberField(help_text="Open comparisons whose priority was set.")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ordering = data.validated_data["ordering"]
        ordered = campaign_order(campaign=campaign, ordering=ordering, judge_ids=data.validated_data.get("judges"))
        return Response({"ordering": ordering, "ordered": ordered})
