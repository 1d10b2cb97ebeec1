from django.urls import path

from annotate import views

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
]
