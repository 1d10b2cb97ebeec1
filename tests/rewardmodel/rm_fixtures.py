"""A preference snapshot labelled by simulated annotators with known utilities, and a tiny policy."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotate.models import Policy
from annotate.services.datasets import SnapshotFilters, snapshot_create
from core.callbacks import Callbacks
from tests.factories import CampaignFactory
from tests.policy_fixtures import tiny_policy_dir
from training.simulated_annotators import AnnotatorProfile
from training.simulation import campaign_simulate_labels, scripted_trajectories_generate

TINY_RM = {"hidden": 32, "layers": 1, "heads": 2, "max_length": 256, "batch_size": 16}


def tiny_policy() -> Policy:
    path = tiny_policy_dir(Path(settings.VAR_DIR) / "policies" / "tiny-test-policy")
    return Policy.objects.get_or_create(name="tiny", version="1", defaults={"model_dir": str(path)})[0]


def simulated_snapshot(
    *, tasks: int = 60, flip: float = 0.0, seed: int = 0, annotators: int = 3, world: dict | None = None
):
    """Scripted trajectories judged by simulated annotators (Bradley-Terry over the rubric utility);
    `world`: options of the generated world (the default world's when None)."""
    campaign = CampaignFactory(votes_per_comparison=annotators)
    scripted_trajectories_generate(campaign=campaign, n_tasks=tasks, samples_per_agent=2, seed=seed, world=world)
    campaign_simulate_labels(
        campaign=campaign, annotators=annotators, seed=seed, profile=AnnotatorProfile(temperature=1.0, flip=flip)
    )
    return snapshot_create(
        name=f"sim-{seed}-{annotators}-{flip}",
        campaigns=[campaign],
        seed=seed,
        test_fraction=0.25,
        filters=SnapshotFilters(include_synthetic=True),
    )


TINY = {"hidden": 32, "layers": 1, "heads": 2, "max_length": 128}


class Recorder(Callbacks):
    """Callbacks that keep what they were told and stop the run after `stop_after` steps."""

    def __init__(self, stop_after: int | None = None):
        self.steps_seen, self.metric_points, self.lines, self.saved, self.fractions = 0, [], [], [], []
        super().__init__(
            progress=lambda f, m: self.fractions.append(f),
            metrics=lambda step, values: self.metric_points.append((step, values)),
            log=self.lines.append,
            should_stop=self._stop,
            checkpoint=lambda step, path: self.saved.append((step, path)),
        )
        self.stop_after = stop_after

    def _stop(self) -> bool:
        self.steps_seen += 1
        return self.stop_after is not None and self.steps_seen >= self.stop_after


def tiny_reward_model_dir(path: Path) -> str:
    """A tiny reward model trained 3 steps on synthetic pairs (no database): its ranking is
    arbitrary, enough for code that must follow whatever it prefers."""
    from rewardmodel.train import RewardModelConfig, train_reward_model
    from tests.rewardmodel.synthetic import bpe_tokenizer_dir, pairs

    config = RewardModelConfig(tokenizer_dir=bpe_tokenizer_dir(), batch_size=8, epochs=1.0, checkpoint_every=0, **TINY)
    return train_reward_model(pairs(24, seed=1), config, path).model_dir
