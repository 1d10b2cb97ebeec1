from django.urls import path

from rewardmodel import views

app_name = "rewardmodel"
urlpatterns = [
    path("", views.registry, name="registry"),
    path("<int:model_id>/", views.detail, name="detail"),
    path("<int:model_id>/use", views.use_for_campaign, name="use"),
    path("<int:model_id>/campaigns/<int:campaign_id>/", views.margins, name="margins"),
]
