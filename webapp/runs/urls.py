from django.urls import path

from webapp.runs import views as run_views

app_name = "runs"
urlpatterns = [
    path("", run_views.runs, name="list"),
    path("new/<slug:kind>/", run_views.run_new, name="new"),
    path("<id:run_id>/", run_views.run_detail, name="detail"),
    path("<id:run_id>/artifacts/<path:name>", run_views.run_artifact, name="artifact"),
    path("<id:run_id>/cancel", run_views.run_cancel_post, name="cancel"),
    path("<id:run_id>/resume", run_views.run_resume_post, name="resume"),
]
