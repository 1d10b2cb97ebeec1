"""Every route of the site: each app's own URL configuration, mounted here (the wiring)."""

from django.contrib import admin
from django.urls import include, path

from annotate import views as annotate_views

urlpatterns = [
    path("", annotate_views.home, name="home"),
    # Before the admin's many routes: health and the labeling API are what scripts call in a
    # loop, and Django tries the routes in order.
    path("", include("webapp.urls")),
    path("api/v1/", include("arbiter.api_urls")),
    path("admin/", admin.site.urls),
    path("annotate/", include("annotate.urls")),
    path("runs/", include("webapp.runs.urls")),
    path("training/", include("training.urls")),
    path("reward-models/", include("rewardmodel.urls")),
    path("team/", include("webapp.users.urls")),
]

handler400 = "webapp.views.bad_request"
handler403 = "webapp.views.permission_denied"
handler404 = "webapp.views.page_not_found"
handler500 = "webapp.views.server_error"
