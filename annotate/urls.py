from django.urls import path

from annotate import views
from annotate.campaigns import views as campaign_views
from annotate.corrections import views as correction_views
from annotate.datasets import views as dataset_views

app_name = "annotate"
urlpatterns = [
    path("imports/", views.imports, name="imports"),
    path("imports/<id:batch_id>/", views.import_detail, name="import-detail"),
    path("campaigns/", campaign_views.campaigns, name="campaigns"),
    path("campaigns/new/", campaign_views.campaign_new, name="campaign-new"),
    path("campaigns/markdown-preview", campaign_views.markdown_preview, name="markdown-preview"),
    path("campaigns/<id:campaign_id>/", campaign_views.campaign_detail, name="campaign"),
    path("campaigns/<id:campaign_id>/edit/", campaign_views.campaign_edit, name="campaign-edit"),
    path("campaigns/<id:campaign_id>/status", campaign_views.campaign_status, name="campaign-status"),
    path("campaigns/<id:campaign_id>/clone", campaign_views.campaign_clone_post, name="campaign-clone"),
    path("campaigns/<id:campaign_id>/fill", campaign_views.campaign_fill, name="campaign-fill"),
    path(
        "campaigns/<id:campaign_id>/fills/<id:fill_id>",
        campaign_views.campaign_fill_status,
        name="campaign-fill-status",
    ),
    path("campaigns/<id:campaign_id>/gold", campaign_views.campaign_gold, name="campaign-gold"),
    path("campaigns/<id:campaign_id>/gold/promote", campaign_views.campaign_gold_promote, name="campaign-gold-promote"),
    path("campaigns/<id:campaign_id>/label/", views.label, name="label"),
    path("campaigns/<id:campaign_id>/revise-last/", views.revise_last, name="revise-last"),
    path("campaigns/<id:campaign_id>/quality/", views.quality, name="quality"),
    path("campaigns/<id:campaign_id>/order/", views.campaign_order_post, name="campaign_order"),
    path("campaigns/<id:campaign_id>/disagreements/", views.disagreements, name="disagreements"),
    path("comparisons/<id:comparison_id>/", views.comparison_votes, name="comparison-votes"),
    path("assignments/<id:assignment_id>/judgement/", views.judgement_post, name="judgement"),
    path("assignments/<id:assignment_id>/skip/", views.skip_post, name="skip"),
    path("assignments/<id:assignment_id>/correction/", views.correction_post, name="correction-post"),
    path("judgements/<id:judgement_id>/revise/", views.judgement_revise_page, name="judgement-revise"),
    path("corrections/", correction_views.corrections, name="corrections"),
    path("corrections/<id:correction_id>/", correction_views.correction, name="correction"),
    path("corrections/<id:correction_id>/state/", views.correction_state, name="correction-state"),
    path("datasets/", dataset_views.datasets, name="datasets"),
    path("datasets/<id:snapshot_id>/", dataset_views.dataset, name="dataset"),
    path("datasets/<id:snapshot_id>/download", dataset_views.dataset_download, name="dataset-download"),
]
