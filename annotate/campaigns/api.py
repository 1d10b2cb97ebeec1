"""Campaigns over REST: list and progress (every role), create, edit, status, fill, gold,
clone and delete (admins), activity (researchers and admins).

Settings are checked by the services (annotate/services/campaigns.py), which name every
bad field at once; this module only shapes input and output.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.campaign_access import campaigns_labelable_by, dimensions_of
from annotate.models import Campaign, CampaignFill, JudgeMode
from annotate.selectors import campaign_activity, campaigns_progress_set, campaigns_visible, campaigns_with_progress
from annotate.services.campaign_fill import FILL_STRATEGIES, campaign_fill_create, fill_preview, fill_request_clean
from annotate.services.campaigns import (
    ACTIONS,
    campaign_act,
    campaign_clone,
    campaign_create,
    campaign_delete,
    campaign_update,
)
from annotate.services.gold import gold_import, gold_promote_adjudicated, gold_rows_read, gold_upload_bytes
from core.problems import problem
from webapp.access import api_role
from webapp.api_errors import error_body, error_items
from webapp.api_input import IdField, StrictJSONParser, WholeNumberField
from webapp.errors import ArbiterError
from webapp.models import pseudonym_for
from webapp.pagination import ListPage, list_page
from webapp.roles import Role, user_has_role

EVERY_ROLE = (Role.ANNOTATOR, Role.RESEARCHER, Role.ADMIN)
READERS = (Role.RESEARCHER, Role.ADMIN)


class CampaignProgress(serializers.Serializer):
    needed = WholeNumberField(help_text="Judgements the campaign needs: its comparisons (not gold) x votes.")
    done = WholeNumberField(help_text="Judgements made on those comparisons.")
    share = serializers.FloatField(allow_null=True, help_text="done / needed; null without comparisons.")
    last_day = WholeNumberField(help_text="Judgements in the last 24 hours.")
    per_hour = serializers.FloatField(help_text="last_day / 24.")
    eta_hours = serializers.FloatField(
        allow_null=True,
        help_text="Hours to finish at the last day's pace; 0 when finished; null with no pace yet or no comparisons.",
    )
    open_leases = WholeNumberField(help_text="Assignments leased now.")
    left_for_you = WholeNumberField(
        help_text="Comparisons the queue can still give the caller, with the "
        "one they hold now (0 where they may not label)."
    )
    mine = WholeNumberField(help_text="The caller's judgements in this campaign.")
    gold_accuracy = serializers.FloatField(allow_null=True, help_text="Share of gold judgements on the gold side.")
    agreement = serializers.FloatField(
        allow_null=True,
        help_text="Share of pairs of votes on one comparison on the same side (A, B or tie); null before any.",
    )


class Dimension(serializers.Serializer):
    name = serializers.CharField()
    scale = WholeNumberField(help_text="Rated 1..scale (2-10).")
    description = serializers.CharField(allow_blank=True)


class CampaignOutput(serializers.Serializer):
    id = WholeNumberField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Campaign.Status.choices)
    guidelines = serializers.CharField(help_text="Markdown.")
    votes_per_comparison = WholeNumberField()
    lease_seconds = WholeNumberField()
    gold_rate = serializers.FloatField()
    dimensions = serializers.SerializerMethodField()
    rationale_required = serializers.BooleanField()
    deadline = serializers.DateTimeField(allow_null=True)
    pool_only = serializers.BooleanField(help_text="Only the pool's annotators may label it.")
    pool = serializers.SerializerMethodField(help_text="Usernames of the pool (admins only; empty for others).")
    environment = serializers.CharField(allow_blank=True)
    task_split = serializers.CharField(allow_blank=True)
    cloned_from = WholeNumberField(
        source="cloned_from_id", allow_null=True, help_text="The campaign this one was cloned from."
    )
    judge_mode = serializers.ChoiceField(
        choices=JudgeMode.choices, help_text="What annotators see of a judge's vote (docs/judges.md)."
    )
    shown_judge = WholeNumberField(
        source="shown_judge_id", allow_null=True, help_text="The judge whose vote is shown or filled in."
    )
    may_label = serializers.BooleanField(help_text="Whether the caller may label it.")
    progress = CampaignProgress()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_dimensions(self, campaign) -> list[dict]:

        return Dimension(dimensions_of(campaign), many=True).data

    def get_pool(self, campaign) -> list[str]:
        if not self.context.get("admin"):
            return []
        return sorted(campaign.pool.values_list("username", flat=True))


class CampaignInput(serializers.Serializer):
    """For the schema: every setting is optional on edit; `name` is required on create."""

    name = serializers.CharField(max_length=200, required=False)
    guidelines = serializers.CharField(required=False, allow_blank=True, help_text="Markdown, sanitized on display.")
    votes_per_comparison = WholeNumberField(required=False, min_value=1, max_value=50)
    lease_seconds = WholeNumberField(required=False, min_value=30, max_value=7 * 24 * 3600)
    gold_rate = serializers.FloatField(required=False, min_value=0, max_value=1)
    dimensions = Dimension(many=True, required=False)
    rationale_required = serializers.BooleanField(required=False)
    deadline = serializers.DateTimeField(required=False, allow_null=True)
    pool_only = serializers.BooleanField(required=False)
    pool = serializers.ListField(child=serializers.CharField(), required=False, help_text="Usernames (or user ids).")
    environment = serializers.CharField(required=False, allow_blank=True)
    task_split = serializers.CharField(required=False, allow_blank=True, help_text="train, dev, eval or empty (any).")
    judge_mode = serializers.ChoiceField(choices=JudgeMode.choices, required=False)
    shown_judge = IdField(required=False, allow_null=True, help_text="A judge id, or null.")
    status = serializers.ChoiceField(choices=["draft", "active"], required=False, help_text="On create only.")


def _one(campaign: Campaign, request) -> Campaign:
    """The campaign with its progress and may_label for the caller."""
    return campaigns_with_progress(user=request.user, statuses=Campaign.Status.values, ids=[campaign.pk])[0]


def _output(campaign: Campaign, request) -> dict:
    return CampaignOutput(_one(campaign, request), context={"admin": user_has_role(request.user, Role.ADMIN)}).data


def _visible(request, campaign_id: int) -> Campaign:
    """A campaign the caller may see (annotators: those they may label); 404 otherwise."""
    rows = Campaign.objects.all()
    if not user_has_role(request.user, *READERS):
        rows = campaigns_labelable_by(request.user)
    return get_object_or_404(rows, pk=campaign_id)


def _admin_only(request) -> None:
    if not user_has_role(request.user, Role.ADMIN):
        from rest_framework.exceptions import PermissionDenied

        raise PermissionDenied("This needs the admin role.")


STATUS_PARAM = OpenApiParameter(
    "status",
    str,
    description="Comma-separated statuses (default: active for "
    "annotators; every status but archived for researchers and admins).",
)


class CampaignListCreateApi(APIView):
    """Campaigns with their progress for the caller (every role); create one (admins)."""

    permission_classes = [api_role(*EVERY_ROLE)]
    parser_classes = [StrictJSONParser]
    pagination_class = ListPage

    @extend_schema(parameters=[STATUS_PARAM], responses={200: CampaignOutput(many=True)})
    def get(self, request):
        default = (
            ["active"]
            if not user_has_role(request.user, *READERS)
            else [s for s in Campaign.Status.values if s != Campaign.Status.ARCHIVED]
        )
        raw = request.query_params.get("status", "")
        statuses = [s.strip() for s in raw.split(",") if s.strip()] or default
        unknown = [s for s in statuses if s not in Campaign.Status.values]
        if unknown:
            raise ArbiterError(
                f"Unknown status {unknown[0][:40]!r}; one of {', '.join(Campaign.Status.values)}.",
                details=[problem("unknown status", field="status")],
            )
        context = {"admin": user_has_role(request.user, Role.ADMIN)}
        return list_page(
            self,
            campaigns_visible(user=request.user, statuses=statuses),
            lambda page: (
                CampaignOutput(
                    campaigns_progress_set(campaigns=page, user=request.user), many=True, context=context
                ).data
            ),
        )

    @extend_schema(request=CampaignInput, responses={201: CampaignOutput})
    def post(self, request):
        _admin_only(request)
        campaign = campaign_create(data=request.data, created_by=request.user)
        return Response(_output(campaign, request), status=status.HTTP_201_CREATED)


class CampaignDetailApi(APIView):
    """One campaign (every role that may see it); edit it or delete it (admins).

    Editing k below the votes a comparison already has is refused; a new k reopens or
    completes comparisons to match it. Status changes go through `status`.
    """

    permission_classes = [api_role(*EVERY_ROLE)]
    parser_classes = [StrictJSONParser]

    @extend_schema(responses={200: CampaignOutput})
    def get(self, request, campaign_id: int):
        return Response(_output(_visible(request, campaign_id), request))

    @extend_schema(request=CampaignInput, responses={200: CampaignOutput})
    def patch(self, request, campaign_id: int):
        _admin_only(request)
        campaign = campaign_update(campaign=get_object_or_404(Campaign, pk=campaign_id), data=request.data)
        return Response(_output(campaign, request))

    @extend_schema(responses={204: None})
    def delete(self, request, campaign_id: int):
        _admin_only(request)
        campaign_delete(campaign=get_object_or_404(Campaign, pk=campaign_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CampaignStatusApi(APIView):
    """Pause, resume, close, reopen, archive, unarchive or activate a campaign (admins).
    A pause or close hands out no new work; a lease already given can still be submitted."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        action = serializers.ChoiceField(choices=ACTIONS)

    @extend_schema(request=InputSerializer, responses={200: CampaignOutput})
    def post(self, request, campaign_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        campaign = campaign_act(
            campaign=get_object_or_404(Campaign, pk=campaign_id), action=data.validated_data["action"]
        )
        return Response(_output(campaign, request))


class CampaignCloneApi(APIView):
    """A new campaign with this one's settings, guidelines and pool; no comparisons or judgements (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)

    @extend_schema(request=InputSerializer, responses={201: CampaignOutput})
    def post(self, request, campaign_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        copy = campaign_clone(
            campaign=get_object_or_404(Campaign, pk=campaign_id),
            name=data.validated_data["name"],
            created_by=request.user,
        )
        return Response(_output(copy, request), status=status.HTTP_201_CREATED)


class FillInput(serializers.Serializer):
    """For the schema; the fill service checks every field and names the bad ones."""

    strategy = serializers.ChoiceField(choices=FILL_STRATEGIES, required=False, default="all_pairs")
    max_per_task = WholeNumberField(required=False, min_value=1, max_value=1000, default=10)
    import_batches = serializers.ListField(child=IdField(), required=False)
    policies = serializers.ListField(child=IdField(), required=False)
    runs = serializers.ListField(child=IdField(), required=False, help_text="Rollout runs.")
    split = serializers.CharField(required=False, allow_blank=True, help_text="train, dev, eval or empty (any).")
    tags = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Trajectories whose metadata.tags holds any of these."
    )
    policy_a = IdField(required=False, help_text="policy_vs_policy: one side.")
    policy_b = IdField(required=False, help_text="policy_vs_policy: the other side.")
    reward_model = IdField(required=False, help_text="rm_uncertainty: the model that orders the queue.")
    seed = WholeNumberField(required=False, min_value=0, max_value=2**31 - 1)


class FillPreviewInput(FillInput):
    """The same fields as a fill: what it would make is counted, nothing is written."""


class FillPreview(serializers.Serializer):
    comparisons = WholeNumberField(help_text="Comparisons the fill would create.")
    trajectories = WholeNumberField()
    tasks = WholeNumberField()
    already_in_campaign = WholeNumberField()
    identical_refused = WholeNumberField(help_text="Pairs with the same steps and answer, never made.")
    left_out_by_cap = WholeNumberField()
    runs_as_job = serializers.BooleanField()
    then_scoring_run = serializers.BooleanField()


class FillOutput(serializers.ModelSerializer):
    class Meta:
        model = CampaignFill
        fields = [
            "id",
            "campaign",
            "status",
            "strategy",
            "selection",
            "options",
            "progress",
            "trajectories",
            "created_count",
            "existing_count",
            "identical_count",
            "message",
            "created_at",
            "finished_at",
        ]


class CampaignFillPreviewApi(APIView):
    """How many comparisons a fill would make, without making them (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    @extend_schema(request=FillPreviewInput, responses={200: FillPreview})
    def post(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        return Response(fill_preview(campaign=campaign, request=fill_request_clean(request.data)))


class CampaignFillApi(APIView):
    """Fill a campaign from stored trajectories (201 done, 202 queued as a job), and list its fills (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]
    pagination_class = ListPage

    @extend_schema(responses={200: FillOutput(many=True)})
    def get(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        return list_page(self, campaign.fills.all(), lambda page: FillOutput(page, many=True).data)

    @extend_schema(request=FillInput, responses={201: FillOutput, 202: FillOutput})
    def post(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        fill = campaign_fill_create(
            campaign=campaign, request=fill_request_clean(request.data), created_by=request.user
        )
        if fill.status == CampaignFill.Status.FAILED:
            body = error_body(fill.message)
            body["fill"] = FillOutput(fill).data
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        return Response(
            FillOutput(fill).data, status=status.HTTP_201_CREATED if fill.finished else status.HTTP_202_ACCEPTED
        )


class CampaignFillDetailApi(APIView):
    """One fill: its status, progress and counts (admins)."""

    permission_classes = [api_role(Role.ADMIN)]

    @extend_schema(responses={200: FillOutput})
    def get(self, request, campaign_id: int, fill_id: int):
        return Response(FillOutput(get_object_or_404(CampaignFill, pk=fill_id, campaign_id=campaign_id)).data)


class CampaignGoldApi(APIView):
    """Upload gold comparisons with their expected verdicts: a JSONL or CSV file (multipart
    `file`), or a JSON list of rows. All or nothing, every bad row named by its line (admins)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser, MultiPartParser]

    class OutputSerializer(serializers.Serializer):
        marked = WholeNumberField(help_text="Comparisons of the campaign made gold.")
        created = WholeNumberField(help_text="Gold comparisons created for pairs the campaign lacked.")

    @extend_schema(
        request={
            "application/json": {"type": "array", "items": {"type": "object"}},
            "multipart/form-data": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}},
        },
        responses={201: OutputSerializer},
    )
    def post(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        upload = request.FILES.get("file") if hasattr(request, "FILES") else None
        if upload is not None:
            rows = gold_rows_read(gold_upload_bytes(upload), filename=upload.name or "")
        elif isinstance(request.data, list):
            rows = list(enumerate(request.data, start=1))
        else:
            raise ArbiterError("Send a file (multipart, field `file`) or a JSON list of rows.")
        try:
            counts = gold_import(campaign=campaign, rows=rows)
        except ArbiterError as exc:
            return Response(error_body(exc.message, error_items(exc.details)), status=status.HTTP_400_BAD_REQUEST)
        return Response(counts, status=status.HTTP_201_CREATED)


class CampaignGoldPromoteApi(APIView):
    """Make adjudicated comparisons gold with their adjudicated verdict (all of the campaign's, or the listed ones)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        comparisons = serializers.ListField(child=IdField(), required=False, max_length=10_000)

    class OutputSerializer(serializers.Serializer):
        promoted = WholeNumberField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, campaign_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        promoted = gold_promote_adjudicated(
            campaign=get_object_or_404(Campaign, pk=campaign_id), comparison_ids=data.validated_data.get("comparisons")
        )
        return Response({"promoted": promoted})


class CampaignActivityApi(APIView):
    """Per-annotator counts and judgements per day over the last 14 days (researchers and admins)."""

    permission_classes = [api_role(*READERS)]

    class Annotator(serializers.Serializer):
        username = serializers.CharField(help_text="A pseudonym for researchers, the username for admins.")
        judgements = WholeNumberField()
        last_day = WholeNumberField()
        skips = WholeNumberField()
        open_leases = WholeNumberField()
        gold_accuracy = serializers.FloatField(allow_null=True)
        in_pool = serializers.BooleanField()
        last = serializers.DateTimeField(allow_null=True)

    class Day(serializers.Serializer):
        day = serializers.DateField()
        judgements = WholeNumberField()

    class OutputSerializer(serializers.Serializer):
        annotators = serializers.ListField(child=serializers.DictField())
        daily = serializers.ListField(child=serializers.DictField())

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, campaign_id: int):
        activity = campaign_activity(campaign=get_object_or_404(Campaign, pk=campaign_id))
        admin = user_has_role(request.user, Role.ADMIN)  # researchers see pseudonyms, as in exports
        annotators = [
            {
                **{k: v for k, v in a.items() if k != "user"},
                "username": a["user"].username if admin else pseudonym_for(a["user"].pk),
            }
            for a in activity["annotators"]
        ]
        return Response(
            {
                "annotators": self.Annotator(annotators, many=True).data,
                "daily": self.Day([{"day": d, "judgements": n} for d, n in activity["daily"]], many=True).data,
            }
        )
