from django.urls import path

from training.judges import pages as judge_views
from training.web import dashboards as evaluation_views
from training.web import policies as views

app_name = "training"
urlpatterns = [
    path("policies/", views.policies, name="policies"),
    path("policies/<id:policy_id>/", views.policy, name="policy"),
    path("judges/", judge_views.judges, name="judges"),
    path("judges/<id:judge_id>/", judge_views.judge, name="judge"),
    path("evaluations/", evaluation_views.evaluations, name="evaluations"),
    path("evaluations/<id:evaluation_id>/", evaluation_views.evaluation, name="evaluation"),
    path(
        "evaluations/<id:evaluation_id>/next-round/",
        evaluation_views.evaluation_next_round,
        name="evaluation_next_round",
    ),
    path("evaluations/<id:evaluation_id>/compare/", evaluation_views.evaluation_compare, name="evaluation_compare"),
    path(
        "evaluations/<id:evaluation_id>/export.<str:fmt>", evaluation_views.evaluation_export, name="evaluation_export"
    ),
]
