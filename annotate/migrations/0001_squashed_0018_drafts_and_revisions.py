"""annotate's 18 migrations as one, for new installs: the tables as 0018 leaves them, then the
comparison's same-task rule (annotate/comparison_same_task.py), last, when every table has its
final shape. Written from the models by `makemigrations` into an empty module; the data
migrations it replaces only rewrote rows that a new database does not have. A database that
applied some of 0001-0018 goes on with those; one that applied them all counts this as applied.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from annotate.comparison_same_task import backwards, forwards



class Migration(migrations.Migration):
    replaces = [
        ("annotate", "0001_initial"),
        ("annotate", "0002_initial"),
        ("annotate", "0003_comparison_same_task"),
        ("annotate", "0004_comparison_adjudication_and_counters"),
        ("annotate", "0005_dataset_snapshots"),
        ("annotate", "0006_policy_run"),
        ("annotate", "0007_job_lifecycle"),
        ("annotate", "0008_campaign_management"),
        ("annotate", "0009_importbatch_format"),
        ("annotate", "0010_import_trace_formats"),
        ("annotate", "0011_import_partial_traces_and_dropped"),
        ("annotate", "0012_campaign_guidelines_html"),
        ("annotate", "0013_task_belongs_to_environment"),
        ("annotate", "0014_snapshot_judgement_frozen_columns"),
        ("annotate", "0015_judges"),
        ("annotate", "0016_corrections"),
        ("annotate", "0017_environment_tools_and_correction_replay"),
        ("annotate", "0018_drafts_and_revisions"),
    ]

    initial = True

    dependencies = [
        ('webapp', '0002_squashed_0006_run_queue'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='EnvironmentTools',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=100, unique=True)),
                ('tools', models.JSONField(blank=True, help_text='None: not known (see error).', null=True)),
                ('error', models.TextField(blank=True, default='', help_text='Why the worker could not build it, when it could not.')),
                ('described_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='Campaign',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=200)),
                ('guidelines', models.TextField(blank=True, default='', help_text='Markdown, rendered safely.')),
                ('guidelines_html', models.TextField(blank=True, default='', editable=False, help_text='The guidelines rendered (sanitized) when saved, not per page view.')),
                ('status', models.CharField(choices=[('draft', 'Draft'), ('active', 'Active'), ('paused', 'Paused'), ('closed', 'Closed'), ('archived', 'Archived')], default='active', max_length=8)),
                ('votes_per_comparison', models.PositiveSmallIntegerField(default=3)),
                ('lease_seconds', models.PositiveIntegerField(default=900)),
                ('gold_rate', models.FloatField(default=0.0, help_text='Share of assignments that are gold.')),
                ('dimensions', models.JSONField(blank=True, default=list, help_text='Rating dimensions: [{"name": "correctness", "scale": 5, "description": "..."}].')),
                ('rationale_required', models.BooleanField(default=False)),
                ('deadline', models.DateTimeField(blank=True, null=True)),
                ('pool_only', models.BooleanField(default=False, help_text='Only the annotators in the pool may label it.')),
                ('environment', models.CharField(blank=True, default='', help_text='Fill only from tasks of this environment (blank: any).', max_length=100)),
                ('task_split', models.CharField(blank=True, default='', help_text='Fill only from tasks of this split (blank: any).', max_length=8)),
                ('judge_mode', models.CharField(choices=[('blind', 'Blind (never shown)'), ('after_submit', 'Shown after they submit'), ('prefilled', 'Filled into the form')], default='blind', help_text="What annotators see of a judge's vote: nothing (blind), its verdict after they submit, or its verdict filled into the form (prefilled).", max_length=12)),
                ('cloned_from', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotate.campaign')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('pool', models.ManyToManyField(blank=True, related_name='campaign_pools', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Comparison',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('priority', models.FloatField(default=0.0, help_text='Higher is served first.')),
                ('status', models.CharField(choices=[('open', 'Open'), ('complete', 'Complete'), ('retired', 'Retired')], default='open', max_length=8)),
                ('votes', models.PositiveSmallIntegerField(default=0)),
                ('slots_taken', models.PositiveSmallIntegerField(default=0)),
                ('is_gold', models.BooleanField(default=False)),
                ('gold_choice', models.PositiveSmallIntegerField(blank=True, choices=[(1, 'A much better'), (2, 'A better'), (3, 'Tie'), (4, 'B better'), (5, 'B much better')], null=True)),
                ('adjudicated_choice', models.PositiveSmallIntegerField(blank=True, choices=[(1, 'A much better'), (2, 'A better'), (3, 'Tie'), (4, 'B better'), (5, 'B much better')], null=True)),
                ('adjudicated_at', models.DateTimeField(blank=True, null=True)),
                ('adjudication_note', models.TextField(blank=True, default='')),
                ('adjudicated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('campaign', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='comparisons', to='annotate.campaign')),
            ],
        ),
        migrations.CreateModel(
            name='Assignment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('left_is_a', models.BooleanField(help_text='True when trajectory A is shown on the left.')),
                ('status', models.CharField(choices=[('leased', 'Leased'), ('submitted', 'Submitted'), ('skipped', 'Skipped'), ('expired', 'Expired')], default='leased', max_length=10)),
                ('leased_until', models.DateTimeField()),
                ('shown_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('skip_reason', models.CharField(blank=True, default='', max_length=500)),
                ('annotator', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='assignments', to=settings.AUTH_USER_MODEL)),
                ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='assignments', to='annotate.comparison')),
            ],
        ),
        migrations.CreateModel(
            name='Correction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('kind', models.CharField(choices=[('answer', 'Answer'), ('tool_call', 'Tool Call')], max_length=10)),
                ('step', models.PositiveIntegerField(help_text="The original's step where the correction starts.")),
                ('replayed', models.BooleanField(default=False, help_text="Executed in the task's environment (real observations, rubric outcome).")),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('accepted', 'Accepted'), ('rejected', 'Rejected')], default='pending', max_length=10)),
                ('reviewed_at', models.DateTimeField(blank=True, null=True)),
                ('review_note', models.TextField(blank=True, default='')),
                ('author', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='corrections', to=settings.AUTH_USER_MODEL)),
                ('comparison', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='corrections', to='annotate.comparison')),
                ('reviewed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='CorrectionReplay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life from its worker.', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='', help_text='Why the job failed, when it did.')),
                ('note', models.TextField(blank=True, default='', help_text='Why it stays as edited, when it does.')),
                ('correction', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='replay', to='annotate.correction')),
            ],
        ),
        migrations.CreateModel(
            name='DatasetSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life from its worker.', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='', help_text='Why the job failed, when it did.')),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True, default='')),
                ('filters', models.JSONField(default=dict, help_text='min_votes, min_agreement, include_synthetic, date range.')),
                ('aggregation', models.CharField(choices=[('majority', 'Majority of the votes'), ('mean', 'Mean of the 5-point scale')], default='majority', max_length=10)),
                ('ties', models.CharField(choices=[('keep', 'Keep (margin 0)'), ('drop', 'Drop')], default='keep', max_length=4)),
                ('seed', models.PositiveIntegerField(default=0)),
                ('test_fraction', models.FloatField(default=0.2)),
                ('progress', models.FloatField(default=0.0)),
                ('message', models.TextField(blank=True, default='')),
                ('content_hash', models.CharField(blank=True, default='', max_length=64)),
                ('stats', models.JSONField(blank=True, default=dict, help_text='Counts, split sizes, agreement.')),
                ('campaigns', models.ManyToManyField(related_name='snapshots', to='annotate.campaign')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='ImportBatch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life from its worker.', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='', help_text='Why the job failed, when it did.')),
                ('filename', models.CharField(max_length=300)),
                ('stored_path', models.CharField(blank=True, default='', max_length=500)),
                ('partial_traces', models.BooleanField(default=False, help_text='Import traces whose records name a parent missing from the file (marked partial).')),
                ('dropped', models.JSONField(blank=True, default=dict, help_text='What the import left out on purpose, by kind: {kind: count}.')),
                ('layout', models.CharField(blank=True, default='jsonl', help_text='jsonl (a record per line) or document (one JSON document).', max_length=10)),
                ('size_bytes', models.PositiveBigIntegerField(default=0)),
                ('lines_read', models.PositiveIntegerField(default=0)),
                ('created_count', models.PositiveIntegerField(default=0)),
                ('duplicate_count', models.PositiveIntegerField(default=0)),
                ('comparisons_created', models.PositiveIntegerField(default=0)),
                ('error_count', models.PositiveIntegerField(default=0)),
                ('errors', models.JSONField(blank=True, default=list, help_text='[{line, error}], capped.')),
                ('message', models.TextField(blank=True, default='')),
                ('format', models.CharField(choices=[('auto', 'Detect'), ('canonical', 'Canonical v1'), ('openai', 'OpenAI chat'), ('anthropic', 'Anthropic Messages'), ('otel', 'OpenTelemetry GenAI spans'), ('openinference', 'OpenInference spans'), ('langsmith', 'LangSmith runs'), ('langfuse', 'Langfuse traces')], default='auto', help_text='How the file is read; auto detects it from the content (docs/formats/README.md).', max_length=20)),
                ('campaign', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='imports', to='annotate.campaign')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'import batches',
            },
        ),
        migrations.CreateModel(
            name='Judge',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=200)),
                ('kind', models.CharField(choices=[('reward_model', 'Reward model'), ('rubric', 'Environment rubric'), ('chat', 'Chat model (OpenAI-compatible)')], max_length=16)),
                ('description', models.TextField(blank=True, default='')),
                ('config', models.JSONField(blank=True, default=dict, help_text='What this kind needs (never a key).')),
                ('secret', models.TextField(blank=True, default='', editable=False, help_text='A stored API key, encrypted.')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.AddField(
            model_name='campaign',
            name='shown_judge',
            field=models.ForeignKey(blank=True, help_text='The judge whose vote is shown after submit or filled in (judge modes other than blind).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotate.judge'),
        ),
        migrations.CreateModel(
            name='JudgeCall',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('probe', models.CharField(default='first', max_length=8)),
                ('attempt', models.PositiveSmallIntegerField(default=1)),
                ('status', models.CharField(choices=[('ok', 'Ok'), ('invalid', 'Answered, but not a verdict'), ('error', 'Error')], max_length=8)),
                ('http_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='')),
                ('structured_output', models.CharField(blank=True, default='', max_length=12)),
                ('request', models.JSONField(default=dict, help_text='The body sent (messages, model, settings).')),
                ('response', models.TextField(blank=True, default='', help_text='What the server answered, as it answered.')),
                ('latency_s', models.FloatField(default=0.0)),
                ('prompt_tokens', models.PositiveIntegerField(blank=True, null=True)),
                ('completion_tokens', models.PositiveIntegerField(blank=True, null=True)),
                ('cost_usd', models.FloatField(default=0.0)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('comparison', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotate.comparison')),
                ('judge', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='calls', to='annotate.judge')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
            ],
        ),
        migrations.CreateModel(
            name='Judgement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('choice', models.PositiveSmallIntegerField(choices=[(1, 'A much better'), (2, 'A better'), (3, 'Tie'), (4, 'B better'), (5, 'B much better')])),
                ('both_bad', models.BooleanField(default=False)),
                ('ratings', models.JSONField(blank=True, default=dict, help_text='Per-dimension ratings.')),
                ('first_wrong_step_a', models.PositiveIntegerField(blank=True, null=True)),
                ('first_wrong_step_b', models.PositiveIntegerField(blank=True, null=True)),
                ('rationale', models.TextField(blank=True, default='')),
                ('seconds', models.FloatField(default=0.0)),
                ('synthetic', models.BooleanField(default=False)),
                ('judge_suggestion', models.PositiveSmallIntegerField(blank=True, choices=[(1, 'A much better'), (2, 'A better'), (3, 'Tie'), (4, 'B better'), (5, 'B much better')], help_text="The judge's verdict (A/B terms) that was filled into the form (prefilled mode), so anchoring can be measured; null when nothing was filled in.", null=True)),
                ('annotator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='judgements', to=settings.AUTH_USER_MODEL)),
                ('assignment', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='judgement', to='annotate.assignment')),
                ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='judgements', to='annotate.comparison')),
            ],
        ),
        migrations.CreateModel(
            name='JudgementDraft',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('fields', models.JSONField(blank=True, default=dict, help_text="The verdict form's fields by name, each as the text the form holds.")),
                ('assignment', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='draft', to='annotate.assignment')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='JudgementRevision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('before', models.JSONField(help_text="The judgement's verdict columns before the change.")),
                ('after', models.JSONField(help_text="The judgement's verdict columns after the change.")),
                ('judgement', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='revisions', to='annotate.judgement')),
            ],
        ),
        migrations.CreateModel(
            name='JudgeVote',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('probe', models.CharField(choices=[('first', 'First'), ('swapped', 'Swapped'), ('repeat', 'Repeat')], default='first', max_length=8)),
                ('choice', models.PositiveSmallIntegerField(choices=[(1, 'A much better'), (2, 'A better'), (3, 'Tie'), (4, 'B better'), (5, 'B much better')])),
                ('both_bad', models.BooleanField(default=False)),
                ('ratings', models.JSONField(blank=True, default=dict, help_text='{dimension: {"A": n, "B": n}}')),
                ('first_wrong_step_a', models.PositiveIntegerField(blank=True, null=True)),
                ('first_wrong_step_b', models.PositiveIntegerField(blank=True, null=True)),
                ('rationale', models.TextField(blank=True, default='')),
                ('probability_a', models.FloatField(blank=True, help_text="A reward model's P(A is better).", null=True)),
                ('counted', models.BooleanField(default=False, help_text="Counted toward the comparison's k votes.")),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='judge_votes', to='annotate.comparison')),
                ('judge', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='votes', to='annotate.judge')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
            ],
        ),
        migrations.CreateModel(
            name='Policy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=200)),
                ('version', models.CharField(blank=True, default='', max_length=100)),
                ('model_dir', models.CharField(blank=True, default='', max_length=500)),
                ('metadata', models.JSONField(blank=True, default=dict)),
                ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='children', to='annotate.policy')),
                ('run', models.ForeignKey(blank=True, help_text='The run that made this policy (none for imported or hand-registered ones).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='policies', to='webapp.run')),
            ],
            options={
                'verbose_name_plural': 'policies',
            },
        ),
        migrations.CreateModel(
            name='SnapshotCorrection',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('split', models.CharField(max_length=5)),
                ('correction', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.correction')),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotate.datasetsnapshot')),
            ],
        ),
        migrations.CreateModel(
            name='SnapshotJudgement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('split', models.CharField(max_length=5)),
                ('task_external_id', models.CharField(default='', help_text="The comparison's task, by its id.", max_length=200)),
                ('left_is_a', models.BooleanField(blank=True, help_text='Trajectory A was shown on the left (null: no assignment recorded).', null=True)),
                ('judgement', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.judgement')),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotate.datasetsnapshot')),
            ],
        ),
        migrations.CreateModel(
            name='Task',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('external_id', models.CharField(max_length=200)),
                ('prompt', models.TextField()),
                ('environment', models.CharField(blank=True, default='', max_length=100)),
                ('reference_answer', models.TextField(blank=True, default='')),
                ('split', models.CharField(choices=[('train', 'Train'), ('dev', 'Dev'), ('eval', 'Eval')], default='train', max_length=8)),
                ('metadata', models.JSONField(blank=True, default=dict)),
            ],
            options={
                'indexes': [models.Index(fields=['split'], name='task_split_idx')],
                'constraints': [models.UniqueConstraint(fields=('environment', 'external_id'), name='task_environment_external_id_unique'), models.CheckConstraint(condition=models.Q(('split__in', ['train', 'dev', 'eval'])), name='task_split_valid')],
            },
        ),
        migrations.CreateModel(
            name='SnapshotPair',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('split', models.CharField(max_length=5)),
                ('preferred', models.CharField(choices=[('A', 'A'), ('B', 'B'), ('tie', 'Tie')], max_length=3)),
                ('margin', models.FloatField()),
                ('votes', models.PositiveIntegerField()),
                ('agreement', models.FloatField(help_text='Share of votes on the winning side (A, B or tie).')),
                ('source', models.CharField(default='human', help_text='Whose votes made the preference: human (people, simulated annotators when the snapshot includes them) or ai (judges: AI feedback).', max_length=5)),
                ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.comparison')),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pairs', to='annotate.datasetsnapshot')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.task')),
            ],
        ),
        migrations.AddField(
            model_name='comparison',
            name='task',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='comparisons', to='annotate.task'),
        ),
        migrations.CreateModel(
            name='Trajectory',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('schema_version', models.CharField(default='arbiter.trajectory/v1', max_length=50)),
                ('steps', models.JSONField()),
                ('answer', models.TextField(blank=True, default='')),
                ('source', models.CharField(choices=[('generated', 'Generated'), ('imported', 'Imported'), ('corrected', 'Corrected')], default='imported', max_length=16)),
                ('outcome', models.JSONField(blank=True, null=True)),
                ('content_hash', models.CharField(max_length=64)),
                ('behaviour_hash', models.CharField(blank=True, default='', max_length=64)),
                ('num_steps', models.PositiveIntegerField()),
                ('prompt_tokens', models.PositiveIntegerField(blank=True, null=True)),
                ('agent_tokens', models.PositiveIntegerField(blank=True, null=True)),
                ('metadata', models.JSONField(blank=True, default=dict)),
                ('import_batch', models.ForeignKey(blank=True, help_text='The upload that first stored it.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='trajectories', to='annotate.importbatch')),
                ('policy', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='trajectories', to='annotate.policy')),
                ('run', models.ForeignKey(blank=True, help_text='The rollout run that first stored it.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='trajectories', to='annotate.task')),
            ],
            options={
                'verbose_name_plural': 'trajectories',
            },
        ),
        migrations.AddField(
            model_name='correction',
            name='corrected',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='correction_of', to='annotate.trajectory'),
        ),
        migrations.AddField(
            model_name='correction',
            name='original',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='corrections', to='annotate.trajectory'),
        ),
        migrations.AddField(
            model_name='comparison',
            name='trajectory_a',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.trajectory'),
        ),
        migrations.AddField(
            model_name='comparison',
            name='trajectory_b',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.trajectory'),
        ),
        migrations.CreateModel(
            name='CampaignFill',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life from its worker.', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='', help_text='Why the job failed, when it did.')),
                ('selection', models.JSONField(blank=True, default=dict)),
                ('strategy', models.CharField(max_length=40)),
                ('options', models.JSONField(blank=True, default=dict, help_text='max_per_task, seed, policy_a, policy_b, ...')),
                ('progress', models.FloatField(default=0.0)),
                ('trajectories', models.PositiveIntegerField(default=0, help_text='Trajectories selected.')),
                ('created_count', models.PositiveIntegerField(default=0, help_text='Comparisons created.')),
                ('existing_count', models.PositiveIntegerField(default=0, help_text='Pairs already in the campaign.')),
                ('identical_count', models.PositiveIntegerField(default=0, help_text='Pairs refused: the same steps and answer.')),
                ('message', models.TextField(blank=True, default='')),
                ('campaign', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='fills', to='annotate.campaign')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['status', 'heartbeat_at'], name='campaignfill_status_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'succeeded', 'failed', 'cancelled'])), name='campaignfill_status_valid')],
            },
        ),
        migrations.AddIndex(
            model_name='assignment',
            index=models.Index(fields=['comparison', 'status'], name='assignment_comparison_idx'),
        ),
        migrations.AddIndex(
            model_name='assignment',
            index=models.Index(fields=['annotator', 'status'], name='assignment_annotator_idx'),
        ),
        migrations.AddIndex(
            model_name='assignment',
            index=models.Index(condition=models.Q(('status', 'leased')), fields=['leased_until'], name='assignment_lease_expiry_idx'),
        ),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.UniqueConstraint(fields=('comparison', 'annotator'), name='assignment_once_per_annotator'),
        ),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['leased', 'submitted', 'skipped', 'expired'])), name='assignment_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='correctionreplay',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'succeeded', 'failed', 'cancelled'])), name='correctionreplay_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='datasetsnapshot',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'succeeded', 'failed', 'cancelled'])), name='snapshot_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='datasetsnapshot',
            constraint=models.CheckConstraint(condition=models.Q(('test_fraction__gte', 0), ('test_fraction__lt', 1)), name='snapshot_test_fraction_range'),
        ),
        migrations.AddConstraint(
            model_name='datasetsnapshot',
            constraint=models.CheckConstraint(condition=models.Q(('status', 'succeeded'), ('content_hash', ''), _connector='OR'), name='snapshot_hash_only_when_ready'),
        ),
        migrations.AddIndex(
            model_name='importbatch',
            index=models.Index(fields=['status', 'heartbeat_at'], name='importbatch_status_idx'),
        ),
        migrations.AddConstraint(
            model_name='importbatch',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'succeeded', 'failed', 'cancelled'])), name='importbatch_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='judge',
            constraint=models.UniqueConstraint(fields=('name',), name='judge_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='judge',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['reward_model', 'rubric', 'chat'])), name='judge_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.UniqueConstraint(fields=('name',), name='campaign_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('judge_mode__in', ['blind', 'after_submit', 'prefilled'])), name='campaign_judge_mode_valid'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('votes_per_comparison__gte', 1)), name='campaign_votes_at_least_one'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('lease_seconds__gte', 1)), name='campaign_lease_positive'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('gold_rate__gte', 0), ('gold_rate__lte', 1)), name='campaign_gold_rate_range'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('task_split__in', ['', 'train', 'dev', 'eval'])), name='campaign_task_split_valid'),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['draft', 'active', 'paused', 'closed', 'archived'])), name='campaign_status_valid'),
        ),
        migrations.AddIndex(
            model_name='judgecall',
            index=models.Index(fields=['run', 'id'], name='judgecall_run_idx'),
        ),
        migrations.AddConstraint(
            model_name='judgecall',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['ok', 'invalid', 'error'])), name='judgecall_status_valid'),
        ),
        migrations.AddIndex(
            model_name='judgement',
            index=models.Index(fields=['comparison', 'synthetic'], name='judgement_comparison_idx'),
        ),
        migrations.AddConstraint(
            model_name='judgement',
            constraint=models.UniqueConstraint(fields=('comparison', 'annotator'), name='judgement_once_per_annotator'),
        ),
        migrations.AddConstraint(
            model_name='judgement',
            constraint=models.CheckConstraint(condition=models.Q(('choice__gte', 1), ('choice__lte', 5)), name='judgement_choice_range'),
        ),
        migrations.AddConstraint(
            model_name='judgement',
            constraint=models.CheckConstraint(condition=models.Q(('seconds__gte', 0)), name='judgement_seconds_nonnegative'),
        ),
        migrations.AddIndex(
            model_name='judgementrevision',
            index=models.Index(fields=['judgement', 'created_at'], name='judgementrevision_history_idx'),
        ),
        migrations.AddIndex(
            model_name='judgevote',
            index=models.Index(fields=['comparison', 'judge'], name='judgevote_comparison_idx'),
        ),
        migrations.AddConstraint(
            model_name='judgevote',
            constraint=models.UniqueConstraint(fields=('judge', 'comparison', 'probe'), name='judgevote_once_per_probe'),
        ),
        migrations.AddConstraint(
            model_name='judgevote',
            constraint=models.CheckConstraint(condition=models.Q(('choice__gte', 1), ('choice__lte', 5)), name='judgevote_choice_range'),
        ),
        migrations.AddConstraint(
            model_name='judgevote',
            constraint=models.CheckConstraint(condition=models.Q(('probe__in', ['first', 'swapped', 'repeat'])), name='judgevote_probe_valid'),
        ),
        migrations.AddConstraint(
            model_name='judgevote',
            constraint=models.CheckConstraint(condition=models.Q(('probability_a__isnull', True), models.Q(('probability_a__gte', 0), ('probability_a__lte', 1)), _connector='OR'), name='judgevote_probability_range'),
        ),
        migrations.AddConstraint(
            model_name='judgevote',
            constraint=models.CheckConstraint(condition=models.Q(('counted', False), ('probe', 'first'), _connector='OR'), name='judgevote_counted_first'),
        ),
        migrations.AddConstraint(
            model_name='policy',
            constraint=models.UniqueConstraint(fields=('name', 'version'), name='policy_name_version_unique'),
        ),
        migrations.AddConstraint(
            model_name='snapshotcorrection',
            constraint=models.UniqueConstraint(fields=('snapshot', 'correction'), name='snapshotcorrection_once'),
        ),
        migrations.AddConstraint(
            model_name='snapshotcorrection',
            constraint=models.CheckConstraint(condition=models.Q(('split__in', ['train', 'test'])), name='snapshotcorrection_split_valid'),
        ),
        migrations.AddConstraint(
            model_name='snapshotjudgement',
            constraint=models.UniqueConstraint(fields=('snapshot', 'judgement'), name='snapshotjudgement_once'),
        ),
        migrations.AddConstraint(
            model_name='snapshotjudgement',
            constraint=models.CheckConstraint(condition=models.Q(('split__in', ['train', 'test'])), name='snapshotjudgement_split_valid'),
        ),
        migrations.AddConstraint(
            model_name='snapshotpair',
            constraint=models.UniqueConstraint(fields=('snapshot', 'comparison'), name='snapshotpair_once'),
        ),
        migrations.AddConstraint(
            model_name='snapshotpair',
            constraint=models.CheckConstraint(condition=models.Q(('source__in', ['human', 'ai'])), name='snapshotpair_source_valid'),
        ),
        migrations.AddConstraint(
            model_name='snapshotpair',
            constraint=models.CheckConstraint(condition=models.Q(('split__in', ['train', 'test'])), name='snapshotpair_split_valid'),
        ),
        migrations.AddConstraint(
            model_name='snapshotpair',
            constraint=models.CheckConstraint(condition=models.Q(('margin__gte', 0)), name='snapshotpair_margin_nonnegative'),
        ),
        migrations.AddIndex(
            model_name='trajectory',
            index=models.Index(fields=['task', 'policy'], name='trajectory_task_policy_idx'),
        ),
        migrations.AddConstraint(
            model_name='trajectory',
            constraint=models.UniqueConstraint(fields=('content_hash',), name='trajectory_content_hash_unique'),
        ),
        migrations.AddConstraint(
            model_name='trajectory',
            constraint=models.UniqueConstraint(fields=('id', 'task'), name='trajectory_id_task_unique'),
        ),
        migrations.AddConstraint(
            model_name='trajectory',
            constraint=models.CheckConstraint(condition=models.Q(('source__in', ['generated', 'imported', 'corrected'])), name='trajectory_source_valid'),
        ),
        migrations.AddIndex(
            model_name='correction',
            index=models.Index(fields=['status', 'id'], name='correction_status_idx'),
        ),
        migrations.AddConstraint(
            model_name='correction',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['answer', 'tool_call'])), name='correction_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='correction',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'accepted', 'rejected'])), name='correction_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='correction',
            constraint=models.CheckConstraint(condition=models.Q(('original', models.F('corrected')), _negated=True), name='correction_is_another_trajectory'),
        ),
        migrations.AddIndex(
            model_name='comparison',
            index=models.Index(fields=['campaign', 'status', '-priority', 'id'], name='comparison_queue_idx'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('trajectory_a__lt', models.F('trajectory_b'))), name='comparison_pair_ordered'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.UniqueConstraint(fields=('campaign', 'trajectory_a', 'trajectory_b'), name='comparison_pair_unique'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('is_gold', False), ('gold_choice__isnull', False), _connector='OR'), name='comparison_gold_has_answer'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('gold_choice__isnull', True), models.Q(('gold_choice__gte', 1), ('gold_choice__lte', 5)), _connector='OR'), name='comparison_gold_choice_range'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['open', 'complete', 'retired'])), name='comparison_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('slots_taken__gte', models.F('votes'))), name='comparison_slots_cover_votes'),
        ),
        migrations.AddConstraint(
            model_name='comparison',
            constraint=models.CheckConstraint(condition=models.Q(('adjudicated_choice__isnull', True), models.Q(('adjudicated_choice__gte', 1), ('adjudicated_choice__lte', 5)), _connector='OR'), name='comparison_adjudicated_choice_range'),
        ),
        # The same-task rule, once every table is in its final shape.
        migrations.RunPython(forwards, backwards),
    ]
