"""Run kinds of the training app, registered in apps.py: rollouts and behaviour cloning
(agent.py); PPO, RLOO, GRPO, best-of-n and evaluation (improve.py); a loop's next round (loop.py);
a judge voting on a campaign (training/judges/run_kind.py); SFT and DPO from a snapshot (finetune.py); expert
iteration (distill.py)."""

from __future__ import annotations

from training.judges.run_kind import register_judge_kind
from training.run_kinds.agent import register_agent_kinds
from training.run_kinds.distill import register_distill_kind
from training.run_kinds.finetune import register_finetune_kinds
from training.run_kinds.improve import register_improve_kinds
from training.run_kinds.loop import register_loop_kinds


def register_kinds() -> None:

    register_agent_kinds()
    register_improve_kinds()
    register_loop_kinds()
    register_judge_kind()
    register_finetune_kinds()
    register_distill_kind()
