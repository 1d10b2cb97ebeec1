"""Every REST route, under /api/v1/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from annotate import api as annotate_api
from annotate import api_fast
from annotate.campaigns import api as campaign_api
from annotate.corrections import api as correction_api
from annotate.datasets import api as dataset_api
from training.judges import api as judges_api
from training.web import evaluation_api
from webapp.api import TokenListCreateApi, TokenRevokeApi, WhoAmIApi
from webapp.runs import api as run_api

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("whoami", WhoAmIApi.as_view(), name="api-whoami"),
    # The caller's own API tokens (every signed-in user)
    path("tokens/", TokenListCreateApi.as_view(), name="api-tokens"),
    path("tokens/<id:token_id>", TokenRevokeApi.as_view(), name="api-token"),
    # Trajectory import (admins)
    path("trajectories/", annotate_api.TrajectoryImportApi.as_view(), name="api-trajectories"),
    # A trajectory read back as canonical JSON (researchers and admins)
    path("trajectories/<id:trajectory_id>/", annotate_api.TrajectoryDetailApi.as_view(), name="api-trajectory"),
    path("imports/", annotate_api.ImportUploadApi.as_view(), name="api-imports"),
    path("imports/<id:batch_id>/", annotate_api.ImportDetailApi.as_view(), name="api-import-detail"),
    # Labeling (annotators and admins)
    # The two hot endpoints answer the common case on a short path (annotate/api_fast.py).
    path("assignments/next", api_fast.assignment_next_view, name="api-assignment-next"),
    path("assignments/<id:assignment_id>/judgement", api_fast.judgement_submit_view, name="api-judgement-submit"),
    path("assignments/<id:assignment_id>/skip", annotate_api.AssignmentSkipApi.as_view(), name="api-assignment-skip"),
    path(
        "assignments/<id:assignment_id>/draft", annotate_api.AssignmentDraftApi.as_view(), name="api-assignment-draft"
    ),
    path(
        "judgements/<id:judgement_id>/revision",
        annotate_api.JudgementRevisionApi.as_view(),
        name="api-judgement-revision",
    ),
    path(
        "assignments/<id:assignment_id>/correction",
        correction_api.AssignmentCorrectionApi.as_view(),
        name="api-assignment-correction",
    ),
    # Corrections: read (researchers and admins), reviewed (admins)
    path("corrections/", correction_api.CorrectionListApi.as_view(), name="api-corrections"),
    path("corrections/<id:correction_id>", correction_api.CorrectionDetailApi.as_view(), name="api-correction"),
    path(
        "corrections/<id:correction_id>/review",
        correction_api.CorrectionReviewApi.as_view(),
        name="api-correction-review",
    ),
    # Campaigns: progress (every role), settings, status, fill, gold, clone (admins), activity (readers)
    path("campaigns/", campaign_api.CampaignListCreateApi.as_view(), name="api-campaigns"),
    path("campaigns/<id:campaign_id>", campaign_api.CampaignDetailApi.as_view(), name="api-campaign"),
    path("campaigns/<id:campaign_id>/status", campaign_api.CampaignStatusApi.as_view(), name="api-campaign-status"),
    path("campaigns/<id:campaign_id>/clone", campaign_api.CampaignCloneApi.as_view(), name="api-campaign-clone"),
    path(
        "campaigns/<id:campaign_id>/fill/preview",
        campaign_api.CampaignFillPreviewApi.as_view(),
        name="api-campaign-fill-preview",
    ),
    path("campaigns/<id:campaign_id>/fills/", campaign_api.CampaignFillApi.as_view(), name="api-campaign-fills"),
    path(
        "campaigns/<id:campaign_id>/fills/<id:fill_id>",
        campaign_api.CampaignFillDetailApi.as_view(),
        name="api-campaign-fill",
    ),
    path("campaigns/<id:campaign_id>/gold", campaign_api.CampaignGoldApi.as_view(), name="api-campaign-gold"),
    path(
        "campaigns/<id:campaign_id>/gold/promote",
        campaign_api.CampaignGoldPromoteApi.as_view(),
        name="api-campaign-gold-promote",
    ),
    path(
        "campaigns/<id:campaign_id>/activity", campaign_api.CampaignActivityApi.as_view(), name="api-campaign-activity"
    ),
    path(
        "campaigns/<id:campaign_id>/judgements",
        annotate_api.CampaignJudgementsApi.as_view(),
        name="api-campaign-judgements",
    ),
    path(
        "campaigns/<id:campaign_id>/agreement",
        annotate_api.CampaignAgreementApi.as_view(),
        name="api-campaign-agreement",
    ),
    # Judges beside people: votes and agreement (researchers and admins), ordering (admins)
    path(
        "campaigns/<id:campaign_id>/judge-votes",
        judges_api.CampaignJudgeVotesApi.as_view(),
        name="api-campaign-judge-votes",
    ),
    path(
        "campaigns/<id:campaign_id>/judge-agreement",
        judges_api.CampaignJudgeAgreementApi.as_view(),
        name="api-campaign-judge-agreement",
    ),
    path("campaigns/<id:campaign_id>/order", judges_api.CampaignOrderApi.as_view(), name="api-campaign-order"),
    path("judges/", judges_api.JudgeListCreateApi.as_view(), name="api-judges"),
    path("judges/<id:judge_id>", judges_api.JudgeDetailApi.as_view(), name="api-judge"),
    path("judges/<id:judge_id>/calls", judges_api.JudgeCallsApi.as_view(), name="api-judge-calls"),
    # Datasets (researchers and admins)
    path("datasets/", dataset_api.DatasetListCreateApi.as_view(), name="api-datasets"),
    path("datasets/<id:snapshot_id>", dataset_api.DatasetDetailApi.as_view(), name="api-dataset"),
    path("datasets/<id:snapshot_id>/download", dataset_api.DatasetDownloadApi.as_view(), name="api-dataset-download"),
    # Runs (researchers read; admins launch, cancel, resume)
    path("runs/", run_api.RunListCreateApi.as_view(), name="api-runs"),
    path("runs/<id:run_id>", run_api.RunDetailApi.as_view(), name="api-run"),
    path("runs/<id:run_id>/cancel", run_api.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<id:run_id>/resume", run_api.RunResumeApi.as_view(), name="api-run-resume"),
    path("workers/", run_api.WorkersApi.as_view(), name="api-workers"),
    # Users: create, invite, roles, deactivation, passwords, tokens (admins)
    path("users/", include("webapp.users.api_urls")),
    # Before/after evaluations (researchers and admins)
    path("evaluations/", evaluation_api.EvaluationListApi.as_view(), name="api-evaluations"),
    path("evaluations/<id:evaluation_id>/", evaluation_api.EvaluationDetailApi.as_view(), name="api-evaluation"),
]
