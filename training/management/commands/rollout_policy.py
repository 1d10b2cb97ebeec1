"""Roll a policy out in an environment and store the trajectories (and comparisons).

python manage.py rollout_policy [--policy NAME] [--environment encyclopedia] [--split train]
                                [--tasks 50] [--samples 2] [--temperature 1.0] [--campaign NAME]
                                [--seed 0] [--max-action-tokens 48] [--max-context 1536]
"""

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Policy
from annotate.services.campaigns import campaign_get_or_create
from training.envs.services import environment_problems
from training.policy.chat import ChatTemplateError
from training.policy.limits import add_limit_arguments
from training.policy.model_io import PolicyLoadError
from training.policy.services import DEFAULT_POLICY, policy_rollouts_store
from training.run_kinds.agent import RolloutRunConfig
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Sample trajectories from a policy and store them on their tasks."

    def add_arguments(self, parser):
        parser.add_argument("--policy", default=DEFAULT_POLICY, help="policy name (its latest version)")
        parser.add_argument(
            "--environment",
            default="encyclopedia",
            help="a built-in, a configured or installed environment, or package.module:Class",
        )
        parser.add_argument("--split", choices=["train", "dev", "eval"], default="train")
        parser.add_argument("--tasks", type=int, default=50)
        parser.add_argument("--samples", type=int, default=2)
        parser.add_argument("--temperature", type=float, default=1.0)
        parser.add_argument("--campaign")
        parser.add_argument("--seed", type=int, default=0)
        defaults = RolloutRunConfig()
        add_limit_arguments(parser, max_action_tokens=defaults.max_action_tokens, max_context=defaults.max_context)

    def handle(
        self,
        *args,
        policy,
        environment,
        split,
        tasks,
        samples,
        temperature,
        campaign,
        seed,
        max_action_tokens,
        max_context,
        **options,
    ):

        problems = RolloutRunConfig(
            environment=environment,
            split=split,
            tasks=tasks,
            samples_per_task=samples,
            temperature=temperature,
            max_action_tokens=max_action_tokens,
            max_context=max_context,
        ).validate()  # the rollout run's own rules
        problems = problems or environment_problems(environment)
        if problems:
            raise CommandError(problems[0])
        chosen = Policy.objects.filter(name=policy).exclude(model_dir="").order_by("-created_at").first()
        if chosen is None:
            raise CommandError(f"No policy named {policy!r} with a model (python manage.py train_policy builds one).")
        try:
            target = campaign_get_or_create(name=campaign)[0] if campaign else None
            report = policy_rollouts_store(
                policy=chosen,
                split=split,
                n_tasks=tasks,
                samples=samples,
                temperature=temperature,
                campaign=target,
                seed=seed,
                environment=environment,
                max_action_tokens=max_action_tokens,
                max_context=max_context,
            )
        except (ArbiterError, PolicyLoadError, ChatTemplateError) as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Stored {report['trajectories']} trajectories of {chosen} ({report['duplicates']} already stored), "
                f"{report['success']:.0%} correct; {report['comparisons']} comparisons built."
            )
        )
