"""Roll a policy out on encyclopedia tasks and store the trajectories (and comparisons).

    python manage.py rollout_policy [--policy NAME] [--split train] [--tasks 50] [--samples 2]
                                    [--temperature 1.0] [--campaign NAME] [--seed 0]
"""
from django.core.management.base import BaseCommand, CommandError

from annotate.models import Policy
from annotate.services.campaigns import campaign_get_or_create
from training.policy.model_io import PolicyLoadError
from training.policy.services import DEFAULT_POLICY, policy_rollouts_store
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Sample trajectories from a policy and store them on their tasks."

    def add_arguments(self, parser):
        parser.add_argument("--policy", default=DEFAULT_POLICY, help="policy name (its latest version)")
        parser.add_argument("--environment", default="encyclopedia",
                            help="a built-in, a configured or installed environment, or package.module:Class")
        parser.add_argument("--split", choices=["train", "dev", "eval"], default="train")
        parser.add_argument("--tasks", type=int, default=50)
        parser.add_argument("--samples", type=int, default=2)
        parser.add_argument("--temperature", type=float, default=1.0)
        parser.add_argument("--campaign")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, policy, environment, split, tasks, samples, temperature, campaign, seed, **options):
        from training.envs.services import environment_problems
        from training.policy.chat import ChatTemplateError

        problems = environment_problems(environment)
        if problems:
            raise CommandError(problems[0])
        chosen = Policy.objects.filter(name=policy).exclude(model_dir="").order_by("-created_at").first()
        if chosen is None:
            raise CommandError(f"No policy named {policy!r} with a model (python manage.py train_policy builds one).")
        try:
            target = campaign_get_or_create(name=campaign)[0] if campaign else None
            report = policy_rollouts_store(policy=chosen, split=split, n_tasks=tasks, samples=samples,
                                           temperature=temperature, campaign=target, seed=seed,
                                           environment=environment)
        except (ArbiterError, PolicyLoadError, ChatTemplateError) as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        self.stdout.write(self.style.SUCCESS(
            f"Stored {report['trajectories']} trajectories of {chosen} ({report['duplicates']} already stored), "
            f"{report['success']:.0%} correct; {report['comparisons']} comparisons built."))
