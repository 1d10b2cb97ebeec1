"""REST endpoints of the annotation app: one view per operation, thin."""

from __future__ import annotations

from django.http import QueryDict
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.judgement_input import (
    DRAFT_MAX_BYTES,
    RATING_MAX,
    RATIONALE_MAX,
    SCALE,
    SCALE_WORDS,
    draft_parse,
    judgement_parse,
)
from annotate.judges.votes import judge_vote_after_submit
from annotate.models import Campaign, ImportBatch, Judgement
from annotate.quality import campaign_quality
from annotate.selectors import assignment_screen_payload
from annotate.services.assignments import assignment_next, assignment_skip, judgement_submit
from annotate.services.drafts import DraftClosed, DraftNotYours, draft_discard, draft_of, draft_save
from annotate.services.imports import (
    import_upload_create,
    trajectories_import_objects,
)
from annotate.services.revisions import JudgementFrozen, JudgementNotYours, judgement_revise, judgement_revisions
from annotate.trace_formats.reading import IMPORT_FORMATS as FORMATS
from annotate.trajectory_document import trajectory_document, trajectory_get
from webapp.access import api_role
from webapp.api_errors import error_body, error_items
from webapp.api_input import IdField, Int32Field, StrictJSONParser, WholeNumberField, id_parameter, query_id
from webapp.errors import ArbiterError
from webapp.models import pseudonym_for
from webapp.pagination import OldestFirstListPage, list_page
from webapp.roles import Role
from webapp.uploads import body_too_big


def _campaign_from(campaign_id: int | None) -> Campaign | None:
    if campaign_id is None:
        return None
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise ArbiterError(f"No campaign with id {campaign_id}.")
    return campaign


class ImportBatchOutput(serializers.ModelSerializer):
    class Meta:
        model = ImportBatch
        fields = [
            "id",
            "filename",
            "size_bytes",
            "campaign",
            "status",
            "lines_read",
            "created_count",
            "duplicate_count",
            "comparisons_created",
            "error_count",
            "errors",
            "message",
            "format",
            "layout",
            "partial_traces",
            "dropped",
            "created_at",
            "updated_at",
        ]


FORMAT_HELP = (
    "How the input is read: auto (default) detects it from the content; canonical, openai "
    "(OpenAI chat) or anthropic (Anthropic Messages), a trajectory each; otel (OpenTelemetry "
    "GenAI spans), openinference, langsmith (runs) or langfuse (traces and observations), "
    "records grouped by trace (docs/formats/)."
)
PARTIAL_HELP = (
    "Import traces whose records name a parent that is not in the input, marking their "
    "trajectories metadata.partial_trace; without it such input is refused, naming the trace and "
    "the record."
)


def _format_from(request) -> str:
    raw = request.query_params.get("format") or "auto"
    if raw not in FORMATS:
        raise serializers.ValidationError({"format": [f"Unknown format {raw[:40]!r}: one of {', '.join(FORMATS)}."]})
    return raw


class TrajectoryImportApi(APIView):
    """Import trajectories posted as JSON: one object or a list, in any import format (trace records too)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [StrictJSONParser]

    class OutputSerializer(serializers.Serializer):
        created = WholeNumberField()
        duplicates = WholeNumberField()
        comparisons_created = WholeNumberField()
        trajectory_ids = serializers.ListField(child=WholeNumberField())
        dropped = serializers.DictField(
            child=WholeNumberField(),
            help_text="What was left out on purpose, by kind (redacted_thinking: count); empty when nothing.",
        )

    @extend_schema(
        parameters=[
            id_parameter("campaign", description="Build comparisons in this campaign."),
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(FORMATS), description=FORMAT_HELP),
            OpenApiParameter(
                "partial_traces", OpenApiTypes.STR, enum=["0", "1", "true", "false"], description=PARTIAL_HELP
            ),
        ],
        request={"application/json": {"oneOf": [{"type": "object"}, {"type": "array"}]}},
        responses={201: OutputSerializer},
    )
    def post(self, request):
        campaign = _campaign_from(query_id(request, "campaign"))
        format = _format_from(request)
        body = request.data
        if isinstance(body, dict):
            body = [body]
        if not isinstance(body, list):
            raise ArbiterError("Send one trajectory object or a list of them.")
        partial = request.query_params.get("partial_traces", "0")
        if partial not in ("0", "1", "true", "false"):
            raise ArbiterError("partial_traces: 1/true or 0/false.")
        report = trajectories_import_objects(
            objects=body, campaign=campaign, format=format, partial_traces=partial in ("1", "true")
        )
        out = self.OutputSerializer(
            {
                "created": report.created,
                "duplicates": report.duplicates,
                "comparisons_created": report.comparisons_created,
                "trajectory_ids": report.trajectory_ids,
                "dropped": report.dropped,
            }
        )
        return Response(out.data, status=status.HTTP_201_CREATED)


class TrajectoryDocumentTask(serializers.Serializer):
    external_id = serializers.CharField()
    prompt = serializers.CharField()
    environment = serializers.CharField(required=False, help_text="Present when the task names one.")
    reference_answer = serializers.CharField(required=False, help_text="Present when the task has one.")
    split = serializers.ChoiceField(choices=["train", "dev", "eval"])
    metadata = serializers.DictField(required=False)


class TrajectoryDocumentAgent(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField(required=False)


class TrajectoryDocument(serializers.Serializer):
    """A trajectory in canonical JSON (docs/formats/canonical.md), the format an import reads."""

    schema = serializers.ChoiceField(choices=["arbiter.trajectory/v1"])
    task = TrajectoryDocumentTask()
    agent = TrajectoryDocumentAgent()
    steps = serializers.ListField(child=serializers.DictField(), help_text="Ordered steps (thought, action, ...).")
    answer = serializers.CharField(allow_blank=True)
    outcome = serializers.DictField(required=False, help_text="The rubric outcome, when known.")
    metadata = serializers.DictField(required=False)


class TrajectoryDetailApi(APIView):
    """One stored trajectory as canonical JSON (`arbiter.trajectory/v1`), reference answer included:
    researchers and admins, who see reference answers elsewhere too; never annotators."""

    permission_classes = [api_role(Role.RESEARCHER, Role.ADMIN)]

    @extend_schema(responses={200: TrajectoryDocument})
    def get(self, request, trajectory_id: int):
        trajectory = trajectory_get(trajectory_id=trajectory_id)
        if trajectory is None:
            raise NotFound(f"No trajectory with id {trajectory_id}.")
        return Response(trajectory_document(trajectory=trajectory))


class ImportUploadApi(APIView):
    """Upload a JSONL file. Small files are imported at once (201), large ones by a job (202)."""

    permission_classes = [api_role(Role.ADMIN)]
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()
        campaign = IdField(required=False)
        format = serializers.ChoiceField(choices=FORMATS, required=False, default="auto", help_text=FORMAT_HELP)
        partial_traces = serializers.BooleanField(required=False, default=False, help_text=PARTIAL_HELP)

    @extend_schema(request=InputSerializer, responses={201: ImportBatchOutput, 202: ImportBatchOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        campaign = _campaign_from(data.validated_data.get("campaign"))
        batch = import_upload_create(
            upload=data.validated_data["file"],
            campaign=campaign,
            created_by=request.user,
            format=data.validated_data["format"],
            partial_traces=data.validated_data["partial_traces"],
        )
        if batch.status == ImportBatch.Status.FAILED:  # imported in the request, and refused
            body = error_body(batch.message, error_items(batch.errors))
            body["import"] = ImportBatchOutput(batch).data
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        code = status.HTTP_201_CREATED if batch.finished else status.HTTP_202_ACCEPTED
        return Response(ImportBatchOutput(batch).data, status=code)


class ImportDetailApi(APIView):
    """An import's status, counts and the reasons for any bad lines."""

    permission_classes = [api_role(Role.ADMIN)]

    @extend_schema(responses={200: ImportBatchOutput})
    def get(self, request, batch_id: int):
        return Response(ImportBatchOutput(get_object_or_404(ImportBatch, pk=batch_id)).data)


# Labeling over REST, for tools and scripts: the same services as the comparison screen.

LABELERS = (Role.ANNOTATOR, Role.ADMIN)


class AssignmentOutput(serializers.Serializer):
    """An assignment in screen terms: left and right, never the policies behind them."""

    id = WholeNumberField()
    campaign = WholeNumberField()
    leased_until = serializers.DateTimeField()
    prompt = serializers.CharField()
    left = serializers.DictField(help_text="steps (canonical v1) and answer of the left trajectory")
    right = serializers.DictField(help_text="steps (canonical v1) and answer of the right trajectory")
    dimensions = serializers.ListField(child=serializers.CharField(), help_text="The rating dimensions' names.")
    rating_dimensions = serializers.ListField(
        child=serializers.DictField(), help_text="Each dimension: name, scale (rated 1..scale), description."
    )
    rationale_required = serializers.BooleanField()
    judge_suggestion = WholeNumberField(
        allow_null=True,
        help_text="In a campaign whose judge mode is prefilled: the judge's verdict in screen terms (1 left much "
        "better .. 5 right much better), to start from; null otherwise.",
    )


class AssignmentNextApi(APIView):
    """The caller's current assignment in a campaign, or a new one; 204 when none is left."""

    permission_classes = [api_role(*LABELERS)]

    @extend_schema(parameters=[id_parameter("campaign", required=True)], responses={200: AssignmentOutput, 204: None})
    def get(self, request):

        campaign = _campaign_from(query_id(request, "campaign", required=True))
        assignment = assignment_next(campaign=campaign, annotator=request.user)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        # The payload is built from plain values: no serializer pass over the steps.
        return Response(assignment_screen_payload(assignment_id=assignment.pk))


class JudgementOutput(serializers.ModelSerializer):
    class Meta:
        model = Judgement
        fields = [
            "id",
            "comparison",
            "choice",
            "both_bad",
            "ratings",
            "first_wrong_step_a",
            "first_wrong_step_b",
            "rationale",
            "seconds",
            "synthetic",
            "created_at",
        ]


class JudgeVoteShown(serializers.Serializer):
    judge = serializers.CharField(help_text="The judge's name.")
    choice = WholeNumberField(help_text="Its verdict in A/B terms, like the judgement's choice.")
    both_bad = serializers.BooleanField()
    rationale = serializers.CharField(allow_blank=True)


class SubmittedJudgement(JudgementOutput):
    judge_vote = serializers.SerializerMethodField(
        help_text="The campaign's judge's vote on this comparison, once submitted (judge modes after_submit and "
        "prefilled); null in blind mode or when the judge has not voted."
    )

    class Meta(JudgementOutput.Meta):
        fields = [*JudgementOutput.Meta.fields, "judge_vote"]

    @extend_schema_field(JudgeVoteShown(allow_null=True))
    def get_judge_vote(self, judgement) -> dict | None:

        return judge_vote_after_submit(judgement=judgement)


class JudgementSubmitApi(APIView):
    """Judge an assignment in screen terms (1 = left much better … 5 = right much better).

    201 the first time, 200 with the same judgement on a repeat (double click, retry).
    """

    permission_classes = [api_role(*LABELERS)]

    class InputSerializer(serializers.Serializer):
        """The body, for the schema only: `judgement_parse` reads it (annotate/judgement_input.py)."""

        choice = WholeNumberField(min_value=SCALE.start, max_value=SCALE[-1], help_text=SCALE_WORDS)
        both_bad = serializers.BooleanField(default=False)
        ratings = serializers.DictField(
            child=serializers.DictField(child=WholeNumberField(min_value=1, max_value=RATING_MAX)),
            help_text=f"Per dimension, {{left, right}}: 1 to the dimension's scale (at most {RATING_MAX}).",
            required=False,
            default=dict,
        )
        first_wrong_step_left = Int32Field(required=False, allow_null=True)
        first_wrong_step_right = Int32Field(required=False, allow_null=True)
        rationale = serializers.CharField(required=False, allow_blank=True, default="", max_length=RATIONALE_MAX)

    @extend_schema(request=InputSerializer, responses={201: SubmittedJudgement, 200: SubmittedJudgement})
    def post(self, request, assignment_id: int):

        # A form or multipart body arrives as a QueryDict: its last value per field, as text.
        body = request.data.dict() if isinstance(request.data, QueryDict) else request.data
        judgement, created = judgement_submit(
            assignment_id=assignment_id, annotator=request.user, verdict=judgement_parse(body)
        )
        return Response(
            SubmittedJudgement(judgement).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class AssignmentSkipApi(APIView):
    permission_classes = [api_role(*LABELERS)]

    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=500)

    @extend_schema(request=InputSerializer, responses={204: None})
    def post(self, request, assignment_id: int):

        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        assignment_skip(assignment_id=assignment_id, annotator=request.user, reason=data.validated_data["reason"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class CampaignJudgement(JudgementOutput):
    annotator = serializers.SerializerMethodField(help_text="Pseudonym, stable across exports.")

    class Meta(JudgementOutput.Meta):
        fields = [*JudgementOutput.Meta.fields, "annotator"]

    def get_annotator(self, judgement) -> str:
        return pseudonym_for(judgement.annotator_id)


class CampaignJudgementsApi(APIView):
    """A campaign's judgements, a page at a time in the order they were made, annotators
    pseudonymized (researchers and admins)."""

    permission_classes = [api_role(Role.RESEARCHER, Role.ADMIN)]
    pagination_class = OldestFirstListPage

    @extend_schema(responses={200: CampaignJudgement(many=True)})
    def get(self, request, campaign_id: int):
        campaign = get_object_or_404(Campaign, pk=campaign_id)
        rows = Judgement.objects.filter(comparison__campaign=campaign)
        return list_page(self, rows, lambda page: CampaignJudgement(page, many=True).data)


class AgreementPairwise(serializers.Serializer):
    pairs = WholeNumberField(help_text="Pairs of votes on the same comparison.")
    with_ties = serializers.FloatField(allow_null=True, help_text="Share of pairs on the same side (A, B or tie).")
    excluding_ties = serializers.FloatField(allow_null=True, help_text="The same over pairs with no tie vote.")
    pairs_without_ties = WholeNumberField()
    tie_as_half = serializers.FloatField(allow_null=True, help_text="A tie against a side counts as half.")


class AgreementAnnotator(serializers.Serializer):
    annotator = serializers.CharField(help_text="Pseudonym, stable across exports.")
    synthetic = serializers.BooleanField()
    judgements = WholeNumberField()
    median_seconds = serializers.FloatField(allow_null=True)
    gold_judged = WholeNumberField()
    gold_accuracy = serializers.FloatField(allow_null=True)
    majority_compared = WholeNumberField()
    majority_agreement = serializers.FloatField(allow_null=True)
    non_tie = WholeNumberField()
    left_rate = serializers.FloatField(allow_null=True, help_text="Share of non-tie votes for the left side.")
    skips = WholeNumberField()


class CampaignAgreementApi(APIView):
    """Agreement figures of a campaign (researchers and admins)."""

    permission_classes = [api_role(Role.RESEARCHER, Role.ADMIN)]

    class OutputSerializer(serializers.Serializer):
        judgements = WholeNumberField()
        comparisons = WholeNumberField()
        complete = WholeNumberField(help_text="Comparisons with all their votes.")
        krippendorff_alpha_ordinal = serializers.FloatField(allow_null=True)
        pairwise = AgreementPairwise()
        annotators = AgreementAnnotator(many=True)

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, campaign_id: int):
        from dataclasses import asdict

        q = campaign_quality(campaign=get_object_or_404(Campaign, pk=campaign_id))
        annotators = [{**asdict(a), "annotator": pseudonym_for(a.annotator_id)} for a in q.annotators]
        return Response(
            {
                "judgements": q.judgements,
                "comparisons": q.comparisons,
                "complete": q.complete,
                "krippendorff_alpha_ordinal": q.alpha,
                "pairwise": AgreementPairwise(q.pairwise).data,
                "annotators": AgreementAnnotator(annotators, many=True).data,
            }
        )


# Judgements in progress and revisions: the comparison screen uses these too (session and CSRF).


def _refused(exc: ArbiterError, code: int) -> Response:
    return Response(error_body(exc.message, error_items(exc.details)), status=code)


class DraftOutput(serializers.Serializer):
    fields = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        help_text="The verdict form's fields by name (choice, both_bad, rationale, first_wrong_left, "
        "first_wrong_right, rating__<dimension>__<left|right>), each as text; empty when there is no draft.",
    )
    updated_at = serializers.DateTimeField(allow_null=True, help_text="When it was last saved; null: no draft.")


def _draft_out(draft) -> dict:
    return DraftOutput(
        {"fields": draft.fields if draft else {}, "updated_at": draft.updated_at if draft else None}
    ).data


class AssignmentDraftApi(APIView):
    """The caller's judgement in progress on one of their assignments, kept on the server while
    the comparison is held for them (the comparison screen saves it as the person works and
    brings it back in any tab or browser). Removed when the assignment is submitted, skipped or
    expired: saving then is refused with 409."""

    permission_classes = [api_role(*LABELERS)]

    class InputSerializer(serializers.Serializer):
        """The body, for the schema only: `draft_parse` reads it (annotate/judgement_input.py)."""

        fields = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=RATIONALE_MAX))

    @extend_schema(responses={200: DraftOutput})
    def get(self, request, assignment_id: int):
        try:
            draft = draft_of(assignment_id=assignment_id, annotator=request.user)
        except DraftNotYours as exc:
            return _refused(exc, status.HTTP_404_NOT_FOUND)
        return Response(_draft_out(draft))

    @extend_schema(request=InputSerializer, responses={200: DraftOutput})
    def put(self, request, assignment_id: int):
        body_too_big(request, DRAFT_MAX_BYTES, "a draft")  # refused from its length, before it is read
        fields = draft_parse(request.data)
        try:
            draft = draft_save(assignment_id=assignment_id, annotator=request.user, fields=fields)
        except DraftNotYours as exc:
            return _refused(exc, status.HTTP_404_NOT_FOUND)
        except DraftClosed as exc:
            return _refused(exc, status.HTTP_409_CONFLICT)
        return Response(_draft_out(draft))

    @extend_schema(responses={204: None})
    def delete(self, request, assignment_id: int):
        try:
            draft_discard(assignment_id=assignment_id, annotator=request.user)
        except DraftNotYours as exc:
            return _refused(exc, status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RevisionOutput(serializers.Serializer):
    before = serializers.DictField(help_text="The verdict columns before the change (A/B terms).")
    after = serializers.DictField(help_text="The verdict columns after it.")
    created_at = serializers.DateTimeField(help_text="When it changed.")


class RevisedJudgement(JudgementOutput):
    revisions = serializers.SerializerMethodField(help_text="Every change to this judgement, oldest first.")

    class Meta(JudgementOutput.Meta):
        fields = [*JudgementOutput.Meta.fields, "updated_at", "revisions"]

    @extend_schema_field(RevisionOutput(many=True))
    def get_revisions(self, judgement) -> list[dict]:
        return RevisionOutput(judgement_revisions(judgement=judgement), many=True).data


class JudgementRevisionApi(APIView):
    """Revise one of the caller's last judgements in a campaign (GET: it and its changes so far).

    The body is a judgement in screen terms, as at submit, with the sides of the assignment it was
    made on. 200 with the judgement as it now stands and every change recorded; 409 when a dataset
    snapshot holds the judgement (snapshots never change) or one of its campaign is being built;
    400 when it is not among the caller's last five in its campaign or the verdict is refused."""

    permission_classes = [api_role(*LABELERS)]

    class InputSerializer(JudgementSubmitApi.InputSerializer):
        """The revised verdict, as at submit (for the schema only: `judgement_parse` reads it)."""

    @extend_schema(responses={200: RevisedJudgement})
    def get(self, request, judgement_id: int):
        judgement = Judgement.objects.filter(pk=judgement_id, annotator=request.user).first()
        if judgement is None:
            return _refused(JudgementNotYours("That judgement is not yours."), status.HTTP_404_NOT_FOUND)
        return Response(RevisedJudgement(judgement).data)

    @extend_schema(request=InputSerializer, responses={200: RevisedJudgement})
    def post(self, request, judgement_id: int):
        body = request.data.dict() if isinstance(request.data, QueryDict) else request.data
        try:
            judgement, _ = judgement_revise(
                judgement_id=judgement_id, annotator=request.user, verdict=judgement_parse(body)
            )
        except JudgementNotYours as exc:
            return _refused(exc, status.HTTP_404_NOT_FOUND)
        except JudgementFrozen as exc:
            return _refused(exc, status.HTTP_409_CONFLICT)
        return Response(RevisedJudgement(judgement).data)
