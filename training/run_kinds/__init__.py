"""Run kinds of the training app, registered in apps.py: rollouts and behaviour cloning
(agent.py); PPO, best-of-n and evaluation (improve.py)."""
from __future__ import annotations


def register_kinds() -> None:
    from training.run_kinds.agent import register_agent_kinds
    from training.run_kinds.improve import register_improve_kinds

    register_agent_kinds()
    register_improve_kinds()
