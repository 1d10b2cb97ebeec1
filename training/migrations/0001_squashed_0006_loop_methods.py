"""training's 6 migrations as one, for new installs: the tables as 0006 leaves them, written
from the models by `makemigrations` into an empty module (the data migrations it replaces only
renamed keys in rows that a new database does not have)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    replaces = [
        ("training", "0001_evaluations"),
        ("training", "0002_rounds"),
        ("training", "0003_rl_run_id"),
        ("training", "0004_rubric_utility"),
        ("training", "0005_loop_direct_runs"),
        ("training", "0006_loop_methods"),
    ]

    initial = True

    dependencies = [
        ('annotate', '0001_squashed_0018_drafts_and_revisions'),
        ('rewardmodel', '0001_initial'),
        ('webapp', '0002_squashed_0006_run_queue'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Evaluation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=200)),
                ('split', models.CharField(default='eval', max_length=8)),
                ('config', models.JSONField(default=dict, help_text='Tasks, samples per task, temperatures, seed.')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('reference_policy', models.ForeignKey(blank=True, help_text='KL is measured against this policy (the starting policy).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotate.policy')),
                ('reward_model', models.ForeignKey(blank=True, help_text='Scores episodes and picks best-of-n.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='evaluations', to='rewardmodel.rewardmodel')),
                ('run', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='evaluation', to='webapp.run')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='EvaluationEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('label', models.CharField(max_length=200)),
                ('kind', models.CharField(choices=[('policy', 'Policy'), ('best_of_n', 'Best Of N')], default='policy', max_length=10)),
                ('n', models.PositiveIntegerField(default=1, help_text='Samples per task that best-of-n chooses from (1: the policy).')),
                ('is_baseline', models.BooleanField(default=False, help_text='The starting policy the others are read against.')),
                ('position', models.PositiveIntegerField(default=0)),
                ('metrics', models.JSONField(default=dict)),
                ('evaluation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='entries', to='training.evaluation')),
                ('policy', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='evaluation_entries', to='annotate.policy')),
            ],
            options={
                'ordering': ['position', 'id'],
            },
        ),
        migrations.CreateModel(
            name='EvaluationEpisode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('mode', models.CharField(choices=[('sampled', 'Sampled'), ('greedy', 'Greedy')], max_length=8)),
                ('sample', models.PositiveIntegerField(default=0)),
                ('correct', models.BooleanField()),
                ('rm_score', models.FloatField(blank=True, null=True)),
                ('kl', models.FloatField(blank=True, help_text="log pi - log pi_ref summed over the agent's tokens.", null=True)),
                ('entry', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='episodes', to='training.evaluationentry')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.task')),
                ('trajectory', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.trajectory')),
            ],
        ),
        migrations.CreateModel(
            name='HumanEvaluation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('mode', models.CharField(choices=[('sampled', 'Sampled'), ('greedy', 'Greedy')], max_length=8)),
                ('identical_pairs', models.PositiveIntegerField(default=0, help_text='Tasks left out: both sides did the same.')),
                ('baseline', models.ForeignKey(help_text='Trajectory A of every comparison.', on_delete=django.db.models.deletion.CASCADE, related_name='+', to='training.evaluationentry')),
                ('campaign', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='human_evaluation', to='annotate.campaign')),
                ('candidate', models.ForeignKey(help_text='Trajectory B of every comparison.', on_delete=django.db.models.deletion.CASCADE, related_name='+', to='training.evaluationentry')),
                ('evaluation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='human_evaluations', to='training.evaluation')),
            ],
        ),
        migrations.CreateModel(
            name='LoopRound',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('loop', models.CharField(help_text="The loop's name (the pipeline's --name).", max_length=150)),
                ('number', models.PositiveIntegerField()),
                ('stage', models.CharField(choices=[('collecting', 'Collecting'), ('labelling', 'Labelling'), ('training', 'Training'), ('done', 'Done')], default='collecting', max_length=10)),
                ('labels', models.CharField(default='simulated', help_text="'simulated' (annotators by the rubric) or 'people' (the round waits).", max_length=10)),
                ('config', models.JSONField(default=dict, help_text="The loop's settings (training.pipeline.PipelineConfig).")),
                ('choice', models.JSONField(blank=True, default=dict, help_text="Why the round's result is what it is: each method's kept checkpoint and its dev figures.")),
                ('seconds', models.JSONField(blank=True, default=dict, help_text='Wall seconds per stage.')),
                ('audit_campaign', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audited_round', to='annotate.campaign')),
                ('campaign', models.OneToOneField(blank=True, help_text="Comparisons of the start policy's samples on training tasks.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotate.campaign')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('dpo_run', models.ForeignKey(blank=True, help_text="With compare_dpo: DPO from the round's start on the round's dataset (corrections and pairs).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
                ('evaluation', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='loop_round', to='training.evaluation')),
                ('expert_iteration_run', models.ForeignKey(blank=True, help_text="Expert iteration from the round's start with the round's reward model, beside RL.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
                ('policy', models.ForeignKey(blank=True, help_text="The round's result: of its methods' kept checkpoints, the one that gains most on dev.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.policy')),
                ('reference_policy', models.ForeignKey(help_text="Round one's start: the KL reference of every round.", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.policy')),
                ('reward_model', models.ForeignKey(blank=True, help_text='Trained on every label of the loop so far.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rewardmodel.rewardmodel')),
                ('rl_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
                ('sft_run', models.ForeignKey(blank=True, help_text="With compare_dpo: SFT from the round's start on the accepted corrections of the round's dataset.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webapp.run')),
                ('start_policy', models.ForeignKey(help_text='The policy this round rolls out and improves.', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.policy')),
            ],
            options={
                'ordering': ['loop', 'number'],
            },
        ),
        migrations.CreateModel(
            name='AuditItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('top', 'Top'), ('disagreement', 'Disagreement')], max_length=12)),
                ('favourite_score', models.FloatField()),
                ('other_score', models.FloatField()),
                ('comparison', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='audit_item', to='annotate.comparison')),
                ('favourite', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotate.trajectory')),
                ('round', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audit_items', to='training.loopround')),
            ],
        ),
        migrations.AddConstraint(
            model_name='evaluationentry',
            constraint=models.UniqueConstraint(fields=('evaluation', 'label'), name='evaluationentry_label_once'),
        ),
        migrations.AddConstraint(
            model_name='evaluationentry',
            constraint=models.CheckConstraint(condition=models.Q(('n__gte', 1)), name='evaluationentry_n_positive'),
        ),
        migrations.AddIndex(
            model_name='evaluationepisode',
            index=models.Index(fields=['entry', 'mode', 'task'], name='evalepisode_entry_mode_task'),
        ),
        migrations.AddConstraint(
            model_name='evaluationepisode',
            constraint=models.UniqueConstraint(fields=('entry', 'task', 'mode', 'sample'), name='evaluationepisode_once'),
        ),
        migrations.AddConstraint(
            model_name='humanevaluation',
            constraint=models.CheckConstraint(condition=models.Q(('baseline', models.F('candidate')), _negated=True), name='humaneval_two_systems'),
        ),
        migrations.AddConstraint(
            model_name='loopround',
            constraint=models.UniqueConstraint(fields=('loop', 'number'), name='loopround_once'),
        ),
        migrations.AddConstraint(
            model_name='loopround',
            constraint=models.CheckConstraint(condition=models.Q(('number__gte', 1)), name='loopround_number_positive'),
        ),
        migrations.AddConstraint(
            model_name='audititem',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['top', 'disagreement'])), name='audititem_kind_valid'),
        ),
    ]
