"""Evaluations over REST (researchers and admins): the list, and one evaluation's report, the
same dict the page and the exports render."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from training.evaluation.behaviour import behaviour_for_situation
from training.evaluation.selectors import evaluations_list
from training.loop.report import dashboard_report
from training.models import Evaluation
from webapp.access import api_role
from webapp.api_input import WholeNumberField
from webapp.pagination import ListPage, list_page
from webapp.roles import Role

READ_ROLES = (Role.RESEARCHER, Role.ADMIN)


class EvaluationListApi(APIView):
    permission_classes = [api_role(*READ_ROLES)]
    pagination_class = ListPage

    class OutputSerializer(serializers.Serializer):
        id = WholeNumberField()
        name = serializers.CharField()
        split = serializers.CharField()
        tasks = WholeNumberField(source="config.tasks", default=None)
        systems = WholeNumberField(source="n_systems")
        run_id = WholeNumberField(allow_null=True)
        reference_policy_id = WholeNumberField(allow_null=True)
        created_at = serializers.DateTimeField()

        class Meta:
            ref_name = "EvaluationListItem"

    @extend_schema(responses={200: OutputSerializer(many=True)})
    def get(self, request):
        return list_page(self, evaluations_list(), lambda page: self.OutputSerializer(page, many=True).data)


SITUATION_PARAM = OpenApiParameter(
    "situation", str, description="Only this situation's figures in `behaviour` (a 400 names the evaluation's own)."
)


class EvaluationDetailApi(APIView):
    permission_classes = [api_role(*READ_ROLES)]

    class OutputSerializer(serializers.Serializer):
        """See docs/evaluation.md for the fields of each part."""

        id = WholeNumberField()
        name = serializers.CharField()
        split = serializers.CharField()
        created_at = serializers.CharField()
        run_id = WholeNumberField(allow_null=True)
        reference_policy = serializers.DictField(allow_null=True)
        reward_model = serializers.DictField(allow_null=True)
        config = serializers.DictField()
        modes = serializers.ListField(child=serializers.CharField())
        metrics = serializers.ListField(child=serializers.CharField())
        baseline_id = WholeNumberField(allow_null=True)
        systems = serializers.ListField(child=serializers.DictField())
        head_to_head = serializers.ListField(
            child=serializers.DictField(),
            help_text="Every pair of systems other than the start, per mode: success of b minus a on the tasks "
            "both played, with its 95% interval, and the winner's label when the interval excludes 0.",
        )
        memorisation = serializers.ListField(
            child=serializers.DictField(),
            help_text="Per policy also played on held-out tasks of the world it trained on (seen_environment): "
            "success on the unseen and the seen world, sampled and greedy, and each change from the start in points.",
        )
        human_evaluations = serializers.ListField(child=serializers.DictField())
        rl_runs = serializers.ListField(child=serializers.DictField())
        behaviour = serializers.DictField(
            help_text="What changed in behaviour: per situation of the tasks (metadata situation, else qtype), "
            "per system and mode, the share of tasks handled right with its 95% Wilson interval and n, and the "
            "paired difference from the baseline (docs/evaluation.md). `?situation=NAME` keeps one situation.",
        )
        loop = serializers.DictField(
            allow_null=True,
            help_text="The loop this evaluation is a round of: its name, "
            "this round's number and every round's figures.",
        )

        class Meta:
            ref_name = "EvaluationReport"

    @extend_schema(parameters=[SITUATION_PARAM], responses={200: OutputSerializer})
    def get(self, request, evaluation_id: int):
        report = dashboard_report(get_object_or_404(Evaluation, pk=evaluation_id))
        situation = request.query_params.get("situation")
        if situation is not None:
            report["behaviour"] = behaviour_for_situation(report["behaviour"], situation)
        return Response(self.OutputSerializer(report).data)
