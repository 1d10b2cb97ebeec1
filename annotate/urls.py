from django.urls import path

from annotate import dataset_views, views

app_name = "annotate"
urlpatterns = [
    path("imports/", views.imports, name="imports"),
    path("imports/<int:batch_id>/", views.import_detail, name="import-detail"),
    path("campaigns/", views.campaigns, name="campaigns"),
    path("campaigns/<int:campaign_id>/label/", views.label, name="label"),
    path("campaigns/<int:campaign_id>/quality/", views.quality, name="quality"),
    path("campaigns/<int:campaign_id>/disagreements/", views.disagreements, name="disagreements"),
    path("comparisons/<int:comparison_id>/", views.comparison_votes, name="comparison-votes"),
    path("assignments/<int:assignment_id>/judgement/", views.judgement_post, name="judgement"),
    path("assignments/<int:assignment_id>/skip/", views.skip_post, name="skip"),
    path("datasets/", dataset_views.datasets, name="datasets"),
    path("datasets/<int:snapshot_id>/", dataset_views.dataset, name="dataset"),
    path("datasets/<int:snapshot_id>/download", dataset_views.dataset_download, name="dataset-download"),
]
