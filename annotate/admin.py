from django.contrib import admin

from annotate import models


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("external_id", "split", "environment", "created_at")
    list_filter = ("split", "environment")
    search_fields = ("external_id", "prompt")


@admin.register(models.Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "model_dir", "parent", "created_at")
    search_fields = ("name",)


@admin.register(models.Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ("id", "task", "policy", "source", "num_steps", "created_at")
    list_filter = ("source", "policy")
    raw_id_fields = ("task", "policy")
    search_fields = ("content_hash", "task__external_id")


@admin.register(models.Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "votes_per_comparison", "gold_rate", "created_at")
    list_filter = ("status",)


@admin.register(models.Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "task", "trajectory_a", "trajectory_b", "status", "is_gold")
    list_filter = ("campaign", "status", "is_gold")
    raw_id_fields = ("task", "trajectory_a", "trajectory_b")


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("id", "comparison", "annotator", "status", "leased_until")
    list_filter = ("status",)
    raw_id_fields = ("comparison",)


@admin.register(models.Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ("id", "comparison", "annotator", "choice", "synthetic", "created_at")
    list_filter = ("synthetic", "choice")
    raw_id_fields = ("comparison", "assignment")


@admin.register(models.ImportBatch)
class ImportBatchAdmin(admin.ModelAdmin):
    list_display = ("id", "filename", "status", "created_count", "error_count", "created_at")
    list_filter = ("status",)
