from django.urls import path

from annotate import views
from annotate.datasets import views as dataset_views

app_name = "annotate"
urlpatterns = [
    path("imports/", views.imports, name="imports"),
    path("imports/<id:batch_id>/", views.import_detail, name="import-detail"),
    path("campaigns/", views.campaigns, name="campaigns"),
    path("campaigns/<id:campaign_id>/label/", views.label, name="label"),
    path("campaigns/<id:campaign_id>/quality/", views.quality, name="quality"),
    path("campaigns/<id:campaign_id>/disagreements/", views.disagreements, name="disagreements"),
    path("comparisons/<id:comparison_id>/", views.comparison_votes, name="comparison-votes"),
    path("assignments/<id:assignment_id>/judgement/", views.judgement_post, name="judgement"),
    path("assignments/<id:assignment_id>/skip/", views.skip_post, name="skip"),
    path("datasets/", dataset_views.datasets, name="datasets"),
    path("datasets/<id:snapshot_id>/", dataset_views.dataset, name="dataset"),
    path("datasets/<id:snapshot_id>/download", dataset_views.dataset_download, name="dataset-download"),
]
