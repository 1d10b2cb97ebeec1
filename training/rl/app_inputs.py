"""What one data-parallel RL process of an app's run builds first (training/rl/rl_rank.py calls
`app_inputs` by name): Django starts (the worker's settings, inherited), then `rl_inputs` builds
the scorer and the deployment's environments. Apart from rl_rank, which stays plain Python."""

from __future__ import annotations


def app_inputs(**arguments) -> dict:
    import django

    django.setup()
    # Lazy: training.rl.services reads Django's models, which exist only once django.setup() has run.
    from training.rl.services import rl_inputs

    return rl_inputs(**arguments)
