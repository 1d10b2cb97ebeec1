"""The skeleton every training loop that judges its policy on dev and keeps checkpoints fills in
(plain Python, no Django): PPO/RLOO/GRPO (training/rl/trainer.py, a step is an "iteration")
and expert iteration (training/rl/expert_iteration.py, a "round").

What the skeleton owns, once for both: the state a resume reads back (steps done, every dev
evaluation, the best checkpoint), the dev judging (training/rl/dev.py `dev_figures`, its metrics
and its line in the log, a cancel honoured while the dev tasks are played), the checkpoint
(training/policy/checkpoints.py `write_checkpoint`, written by the lead process of a
data-parallel run), the choice of the best checkpoint on dev success at the deploy temperature
(training/rl/watch.py `clearly_better`), and the last message and result. A loop fills in its
own steps (rollout and update, or sample, select and fine-tune) and, where it has them, the
tensors a resume needs and what it watches after each judging.

The other trainings share the checkpoint, not this skeleton: behaviour cloning is one gradient
loop inside a step of these (or of a BC run) that keeps its best step in memory and is written
once; SFT and DPO run inside TRL's Trainer, whose checkpoints get the policy file through
`carry_policy_file` and whose tuned policy is written by `write_checkpoint`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.callbacks import RLCallbacks
from core.ranks import Ranks
from training.policy.checkpoints import write_checkpoint
from training.rl.dev import EvaluationCancelled, best_words, dev_episodes_words, dev_figures, dev_success_words
from training.rl.watch import clearly_better

DEV_METRICS = ("success", "greedy_success", "deploy_success", "utility", "f1", "steps", "tool_errors")


@dataclass
class RunEnd:
    """Why and where a checkpointed run ended; `steps` counts those before a resume."""

    steps: int
    stop_reason: str  # "finished", "cancelled", or the loop's own ("kl_budget", "collapse", ...)
    message: str  # one sentence saying why it stopped
    best: dict | None  # {unit, "path", "dev"} of the best checkpoint by dev success
    last_checkpoint: str | None
    evaluations: list[dict] = field(default_factory=list)  # [{unit, "dev": {...}, ...}]
    seconds: float = 0.0


class CheckpointedRun:
    """One run's state, dev judging, checkpoints and end. A subclass names its step (`unit`),
    its files and its checkpoint folders, and may add tensors and a watch after each judging."""

    unit = "iteration"  # the loop's step, in the state, the checkpoints' records and the log
    state_file = "state.json"
    config_file = "config.json"
    latest_only: tuple[str, ...] = ()  # files only the newest checkpoint keeps (what a resume alone reads)

    def __init__(self, *, policy_dir, config, out: Path, callbacks: RLCallbacks, total: int, ranks=None):
        self.policy_dir, self.config, self.out, self.callbacks = Path(policy_dir), config, Path(out), callbacks
        self.total, self.ranks = total, ranks or Ranks()
        self.started = time.monotonic()
        self.state: dict = {self.unit: 0, "evaluations": [], "best": None}
        self.last_checkpoint: str | None = None
        self.dev_tasks: list = []
        self.dev_runner = None
        self.model = self.tokenizer = self.chat = None

    def folder(self, step: int) -> str:
        return f"{self.unit}-{step:04d}"

    def named(self, step: int) -> str:
        """A step as the log says it: "the start" for 0, else "iteration 3" or "round 3"."""
        return "the start" if step == 0 else f"{self.unit} {step}"

    @property
    def step(self) -> int:
        return self.state[self.unit]

    def resume(self, start_dir: Path) -> None:
        """The state of the checkpoint in `start_dir`, read back: the run goes on after its step."""
        self.state.update(json.loads((start_dir / self.state_file).read_text()))
        self.last_checkpoint = str(start_dir)
        self.callbacks.log(f"Resuming after {self.unit} {self.step} from {start_dir}.")

    # Judge, save, end.

    def judge(self, step: int, **extra) -> dict:
        """The policy's dev figures at `step`, recorded as an evaluation: {unit, **extra, "dev"}.
        Raises EvaluationCancelled when a cancel comes while the dev tasks are played."""
        config, callbacks = self.config, self.callbacks
        message = (
            f"Judging {self.named(step)} on {len(self.dev_tasks)} dev tasks ({dev_episodes_words(config)} each) ..."
        )
        callbacks.log(message)  # a run is never silent for minutes: this is its longest step
        callbacks.progress(step / max(1, self.total), message)
        self.model.eval()
        figures = dev_figures(
            self.model,
            self.tokenizer,
            self.dev_runner,
            self.dev_tasks,
            config,
            seed=config.seed,
            chat=self.chat,
            ranks=self.ranks,
            should_stop=callbacks.should_stop,
        )
        entry = {self.unit: step, **extra, "dev": figures}
        self.state["evaluations"].append(entry)
        callbacks.metrics(step, {f"eval/dev_{name}": value for name, value in figures.items() if name in DEV_METRICS})
        rm_score = extra.get("rm_score")
        callbacks.log(
            f"{self.unit.capitalize()} {step}: {dev_success_words(figures)}"
            + (f", reward-model score {rm_score:+.3f}." if rm_score is not None else ".")
        )
        return entry

    def judge_and_save(self, step: int, judged: bool = True, **extra):
        """A checkpoint of `step`, judged on dev first when `judged`; the run's end when a cancel
        came while it was being judged, else None."""
        try:
            entry = self.judge(step, **extra) if judged else None
        except EvaluationCancelled:
            return self.finish("cancelled", f"Cancelled while {self.named(step)} was being judged on dev.")
        self.save(step, entry)
        return None

    def checkpoint_tensors(self) -> dict:
        """Tensors a resume needs beside the policy (name -> state dict); none by default."""
        return {}

    def watch(self, entry: dict) -> None:
        """What the loop watches after each judging (over-optimization, say); nothing by default."""

    def save(self, step: int, entry: dict | None) -> str:
        """The checkpoint of `step` under out/checkpoints, the best kept by dev success, the state."""
        state, lead = self.state, self.ranks.lead  # every process holds the same weights; one writes them
        path = self.out / "checkpoints" / self.folder(step)
        self.callbacks.progress(step / max(1, self.total), f"Saving the checkpoint of {self.unit} {step} ...")
        if entry is not None:
            best = state["best"]
            if best is None or clearly_better(entry["dev"], best["dev"], self.config.best_margin):
                state["best"] = {self.unit: step, "path": str(path), "dev": entry["dev"]}
            self.watch(entry)
        state[self.unit] = step
        if lead:
            write_checkpoint(
                path,
                self.model,
                self.tokenizer,
                policy_dir=self.policy_dir,
                json_files={self.config_file: asdict(self.config), self.state_file: state},
                tensors=self.checkpoint_tensors(),
                replace=True,
            )
            previous = Path(self.last_checkpoint) if self.last_checkpoint else None
            if previous and previous.parent == path.parent and previous != path:
                for name in self.latest_only:
                    (previous / name).unlink(missing_ok=True)
        self.last_checkpoint = str(path)
        self.callbacks.checkpoint(step, str(path))
        self.callbacks.policy_saved(step, str(path), entry["dev"] if entry else {})
        return str(path)

    def saved(self, step: int) -> bool:
        return self.last_checkpoint is not None and Path(self.last_checkpoint).name == self.folder(step)

    def run_end(self, reason: str, message: str) -> RunEnd:
        """The run's end: the kept checkpoint named in the last message, which is logged."""
        message += best_words(self.state["best"], self.unit, self.config.deploy_temperature)
        self.callbacks.log(message)
        return RunEnd(
            steps=self.step,
            stop_reason=reason,
            message=message,
            best=self.state["best"],
            last_checkpoint=self.last_checkpoint,
            evaluations=self.state["evaluations"],
            seconds=round(time.monotonic() - self.started, 1),
        )

    def finish(self, reason: str, message: str):
        """The loop's own result type made from `run_end`; a subclass converts."""
        return self.run_end(reason, message)
