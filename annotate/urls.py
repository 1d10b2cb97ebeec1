from django.urls import path

from annotate import views

app_name = "annotate"
urlpatterns = [
    path("imports/", views.imports, name="imports"),
    path("imports/<int:batch_id>/", views.import_detail, name="import-detail"),
]
