"""Serve a registered policy as an OpenAI-compatible chat endpoint (docs/serving.md).

    python manage.py serve_policy NAME [--policy-version V] [--host 127.0.0.1] [--port 8100]

`POST /v1/chat/completions` with `tools` and `tool_calls` (and `stream`), `GET /v1/models`,
`GET /health`. With ARBITER_SERVE_API_KEY set, requests must send `Authorization: Bearer KEY`.
The server is training/policy/serving.py; this command finds the policy's model directory.
"""

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Policy
from training.policy.chat import ChatTemplateError
from training.policy.services import policy_with_model


class Command(BaseCommand):
    help = "Serve a registered policy as an OpenAI-compatible /v1/chat/completions endpoint."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the policy's name (its newest version with a model, unless --policy-version)")
        parser.add_argument("--policy-version", default=None, help="a version of it")
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")

    def handle(self, *args, name, policy_version, host, port, threads, **options):
        version = policy_version
        from training.policy.serving import PolicyServer, serve

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
        try:
            server = PolicyServer(policy.model_dir, name=policy.name, threads=threads)
        except ChatTemplateError as exc:
            raise CommandError(f"{policy}: {exc}") from None
        httpd = serve(server, host, port, api_key=os.environ.get("ARBITER_SERVE_API_KEY") or None)
        self.stdout.write(
            f"Serving {policy} at http://{host}:{httpd.server_address[1]}/v1/chat/completions (Ctrl-C stops).",
        )
        self.stdout.flush()
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()
