"""Runs over REST: launch (admins), read (researchers and admins), cancel and resume (admins)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.access import api_role
from webapp.api_input import WholeNumberField
from webapp.models import Run, WorkerBeat
from webapp.pagination import ListPage, list_page, page_parameters
from webapp.roles import Role
from webapp.runs.selectors import run_metric_series, runs_filtered
from webapp.runs.services import run_cancel, run_launch, run_resume
from webapp.workers import queue_state, queues_overview, run_queue, run_wait, worker_overview

READ_ROLES = (Role.RESEARCHER, Role.ADMIN)


class RunOutput(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)
    # Where the worker keeps files is the server's business: artifacts and the checkpoint by name
    # and step only (the run page offers their files for download).
    artifacts = serializers.SerializerMethodField()
    checkpoint = serializers.SerializerMethodField()

    def get_artifacts(self, run) -> list[dict]:
        return [
            {"name": str(a.get("name", "")), "bytes": a.get("bytes")}
            for a in run.artifacts or []
            if isinstance(a, dict)
        ]

    def get_checkpoint(self, run) -> dict:
        return {"step": run.checkpoint.get("step")} if isinstance(run.checkpoint, dict) and run.checkpoint else {}

    class Meta:
        model = Run
        fields = [
            "id",
            "kind",
            "name",
            "status",
            "config",
            "progress",
            "progress_message",
            "error",
            "summary",
            "artifacts",
            "lineage",
            "checkpoint",
            "device",
            "worker",
            "attempt",
            "cancel_requested",
            "heartbeat_at",
            "queued_at",
            "started_at",
            "finished_at",
            "created_by",
            "created_at",
        ]


class RunListCreateApi(APIView):
    pagination_class = ListPage

    class InputSerializer(serializers.Serializer):
        kind = serializers.CharField(max_length=32)
        config = serializers.DictField(required=False, default=dict)
        name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        idempotency_key = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")

    class FilterSerializer(serializers.Serializer):
        kind = serializers.CharField(max_length=32, required=False, allow_blank=True, default="")
        status = serializers.ChoiceField(choices=Run.Status.values, required=False, allow_blank=True, default="")

    def get_permissions(self):
        roles = (Role.ADMIN,) if self.request.method == "POST" else READ_ROLES
        return [api_role(*roles)()]

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str, description="Only runs of this kind."),
            OpenApiParameter("status", str, enum=list(Run.Status.values), description="Only runs in this status."),
        ],
        responses={200: RunOutput(many=True)},
    )
    def get(self, request):
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return list_page(self, runs_filtered(**query.validated_data), lambda page: RunOutput(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: RunOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        key = d["idempotency_key"] or request.headers.get("Idempotency-Key", "")
        run = run_launch(kind=d["kind"], config=d["config"], user=request.user, name=d["name"], idempotency_key=key)
        return Response(RunOutput(run).data, status=status.HTTP_201_CREATED)


class RunDetailApi(APIView):
    permission_classes = [api_role(*READ_ROLES)]

    @extend_schema(
        parameters=[OpenApiParameter("metrics", str, enum=["0", "1"], description="0 leaves out the metric series.")],
        description="A run, with `queue` (null once it started): `position` (1 = next), the queued "
        "runs `ahead`, the `running` runs it waits for, their `minutes_left` by progress, "
        "and whether any `worker_alive` takes the run's `queue` (a run that loads no model, a rubric or chat "
        "judge, goes to the housekeeping queue and waits only for runs there).",
        responses={200: RunOutput},
    )
    def get(self, request, run_id: int):
        run = get_object_or_404(Run, pk=run_id)
        body = RunOutput(run).data
        body["queue"] = _queue(run)
        if request.query_params.get("metrics") != "0":
            body["metrics"] = {
                name: [[step, value] for step, value in points] for name, points in run_metric_series(run).items()
            }
        return Response(body)


def _queue(run: Run) -> dict | None:
    """Where a queued run stands: its place in the line, what it waits for, whether a worker is alive."""
    wait = run_wait(run)
    if wait is None:
        return None
    return {
        "position": wait.position,
        "ahead": [r.pk for r in wait.ahead],
        "running": [r.pk for r in wait.running],
        "minutes_left": None if wait.minutes_left is None else round(wait.minutes_left, 1),
        "worker_alive": queue_state(run_queue(run)).has_worker,
        "queue": run_queue(run),
    }


class RunCancelApi(APIView):
    permission_classes = [api_role(Role.ADMIN)]

    @extend_schema(request=None, responses={202: RunOutput})
    def post(self, request, run_id: int):
        get_object_or_404(Run, pk=run_id)
        return Response(RunOutput(run_cancel(run_id=run_id)).data, status=status.HTTP_202_ACCEPTED)


class RunResumeApi(APIView):
    permission_classes = [api_role(Role.ADMIN)]

    @extend_schema(request=None, responses={202: RunOutput})
    def post(self, request, run_id: int):
        get_object_or_404(Run, pk=run_id)
        return Response(RunOutput(run_resume(run_id=run_id)).data, status=status.HTTP_202_ACCEPTED)


class WorkerOutput(serializers.Serializer):
    hostname = serializers.CharField()
    queues = serializers.ListField(child=serializers.CharField())
    pid = WholeNumberField()
    started_at = serializers.DateTimeField()
    beat_at = serializers.DateTimeField()
    alive = serializers.BooleanField(help_text="Beaten within WORKER_ALIVE_SECONDS.")


class QueueOutput(serializers.Serializer):
    alive = WholeNumberField(help_text="Live workers that take it.")
    last_seen = serializers.DateTimeField(allow_null=True, help_text="With none alive: the last beat of one.")


class WorkersApi(APIView):
    """The Celery workers that have beaten, a page at a time, and each queue's state."""

    permission_classes = [api_role(*READ_ROLES)]
    pagination_class = ListPage

    class OutputSerializer(serializers.Serializer):
        next = serializers.URLField(allow_null=True)
        previous = serializers.URLField(allow_null=True)
        results = serializers.ListField(child=WorkerOutput(), help_text="Workers, newest first.")
        queues = serializers.DictField(
            child=QueueOutput(),
            help_text="`default` and `gpu` (and any queue a worker takes), over every worker, not only this page's.",
        )

    @extend_schema(parameters=page_parameters(), responses={200: OutputSerializer})
    def get(self, request):
        return list_page(
            self, WorkerBeat.objects.all(), lambda page: [worker_overview(w) for w in page], queues=queues_overview()
        )
