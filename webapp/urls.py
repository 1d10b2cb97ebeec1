from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from annotate import views as annotate_views
from webapp import views

urlpatterns = [
    path("", annotate_views.home, name="home"),
    path("health", views.health, name="health"),
    # Before the admin's many routes: the labeling API is what scripts call in a loop, and
    # Django tries the routes in order.
    path("api/v1/", include("webapp.api_urls")),
    path("favicon.ico", views.favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/<id:token_id>/revoke", views.token_revoke, name="token-revoke"),
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
