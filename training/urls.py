from django.urls import path

from training import views

app_name = "training"
urlpatterns = [
    path("policies/", views.policies, name="policies"),
    path("policies/<int:policy_id>/", views.policy, name="policy"),
]
