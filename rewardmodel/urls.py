from django.urls import path

from rewardmodel import views

app_name = "rewardmodel"
urlpatterns = [
    path("", views.registry, name="registry"),
    path("<id:model_id>/", views.detail, name="detail"),
    path("<id:model_id>/use", views.use_for_campaign, name="use"),
    path("<id:model_id>/campaigns/<id:campaign_id>/", views.margins, name="margins"),
]
