"""Serve a registered policy as an OpenAI-compatible chat endpoint (docs/serving.md).

    python manage.py serve_policy NAME [--policy-version V] [--host 127.0.0.1] [--port 8100] [--reward-model ID]

`POST /v1/chat/completions` with `tools` and `tool_calls` (and `stream`), `GET /v1/models`,
`GET /health`. With `--reward-model` a request may ask for `best_of: k`: k candidate turns are
sampled and the reward model's favourite is returned. With ARBITER_SERVE_API_KEY set, requests must send `Authorization: Bearer KEY`.
The server is training/policy/serving.py; this command finds the policy's model directory.
"""

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Policy
from core.ids import ascii_digits
from rewardmodel.backbones import BackboneError
from rewardmodel.models import RewardModel
from training.policy.chat import ChatTemplateError
from training.policy.services import policy_with_model
from training.policy.serving import PolicyServer
from training.policy.serving_http import serve


class Command(BaseCommand):
    help = "Serve a registered policy as an OpenAI-compatible /v1/chat/completions endpoint."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the policy's name (its newest version with a model, unless --policy-version)")
        parser.add_argument("--policy-version", default=None, help="a version of it")
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument(
            "--threads",
            type=int,
            default=None,
            help="torch threads (default: half the cores, 1 to 4; 0: torch's own default, every core, "
            "which oversubscribes a machine shared with other work)",
        )
        parser.add_argument(
            "--max-batch", type=int, default=32, help="rows generated together at most (every choice of every request)"
        )
        parser.add_argument(
            "--reward-model",
            default="",
            help="a registered reward model (id, or name: its newest) that ranks the candidates of best_of",
        )

    def handle(self, *args, name, policy_version, host, port, threads, max_batch, reward_model, **options):
        version = policy_version

        if version is None:
            policy = policy_with_model(name)
        else:
            policy = Policy.objects.filter(name=name, version=version).exclude(model_dir="").first()
        if policy is None or not (Path(policy.model_dir) / "config.json").exists():
            known = sorted(set(Policy.objects.exclude(model_dir="").values_list("name", flat=True)))[:20]
            raise CommandError(
                f"No policy {name!r}{' version ' + repr(version) if version else ''} with a model on disk; "
                f"policies with models: {', '.join(known) or 'none'}."
            )
        scorer_dir = _reward_model_dir(reward_model) if reward_model else None
        try:
            server = PolicyServer(
                policy.model_dir, name=policy.name, threads=threads, reward_model=scorer_dir, max_batch=max_batch
            )
        except ChatTemplateError as exc:
            raise CommandError(f"{policy}: {exc}") from None
        except BackboneError as exc:
            raise CommandError(f"--reward-model: {exc}") from None
        httpd = serve(server, host, port, api_key=os.environ.get("ARBITER_SERVE_API_KEY") or None)
        self.stdout.write(
            (f"Reranking best_of candidates with {scorer_dir}.\n" if scorer_dir else "")
            + f"Serving {policy} at http://{host}:{httpd.server_address[1]}/v1/chat/completions "
            + f"({server.threads} torch thread{'s' if server.threads != 1 else ''}; Ctrl-C stops).",
        )
        self.stdout.flush()
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()


def _reward_model_dir(given: str) -> str:
    """The model directory of a registered reward model, by id or by name (its newest)."""
    found = (
        RewardModel.objects.filter(pk=int(given)).first()
        if ascii_digits(given)
        else RewardModel.objects.filter(name=given).order_by("-created_at").first()
    )
    if found is None or not (Path(found.model_dir) / "config.json").exists():
        known = ", ".join(f"{m.pk}: {m.name}" for m in RewardModel.objects.order_by("-pk")[:10])
        raise CommandError(
            f"--reward-model: no reward model {given!r} with a model on disk; the newest: {known or 'none'}."
        )
    return found.model_dir
