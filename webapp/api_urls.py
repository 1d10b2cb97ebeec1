"""Every REST route, under /api/v1/."""
from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from annotate import api as annotate_api

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("trajectories/", annotate_api.TrajectoryImportApi.as_view(), name="api-trajectories"),
    path("imports/", annotate_api.ImportUploadApi.as_view(), name="api-imports"),
    path("imports/<int:batch_id>/", annotate_api.ImportDetailApi.as_view(), name="api-import-detail"),
]
