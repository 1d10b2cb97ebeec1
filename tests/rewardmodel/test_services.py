"""Registry, scoring and queue order by uncertainty; the reward-model pages against every role."""

import shutil
from pathlib import Path

import pytest
from django.db import IntegrityError

from annotate.services.assignments import assignment_next
from annotate.services.datasets import snapshot_create
from rewardmodel.models import ComparisonScore, RewardModel
from rewardmodel.services import (
    campaign_order_by_uncertainty,
    campaign_reward_model_set,
    comparisons_score,
    registry_dir,
    reward_model_register,
    snapshot_problems,
)
from tests.annotate.dataset_fixtures import voted_campaign
from tests.factories import UserFactory
from tests.rewardmodel.rm_fixtures import tiny_policy
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.services import run_launch

pytestmark = pytest.mark.django_db


class LengthScorer:
    """Scores a trajectory by how many steps it has: enough to check what the services store."""

    def score_episodes(self, items):
        return [float(len(steps)) for _, steps in items]


@pytest.fixture
def campaign_and_model(admin_user, tmp_path):
    campaign, comparisons = voted_campaign([[1], [5], [2], [4]])
    snapshot = snapshot_create(name="s", campaigns=[campaign])
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    run = Run.objects.create(kind="reward_model", status="running", attempt=1, created_by=admin_user)
    model = reward_model_register(
        run=run,
        name="rm",
        snapshot=snapshot,
        config={"backbone": "policy-llama"},
        trained_dir=tmp_path / "model",
        metrics={"test": {"accuracy": 0.5, "n": 2}},
        created_by=admin_user,
    )
    return campaign, comparisons, model


def test_registering_moves_the_files_into_the_registry(campaign_and_model, tmp_path):
    _, _, model = campaign_and_model
    assert Path(model.model_dir).parent == registry_dir() and (Path(model.model_dir) / "config.json").exists()
    assert not (tmp_path / "model").exists()


def test_a_failed_registration_leaves_no_files_and_no_row(admin_user, tmp_path):
    campaign, _ = voted_campaign([[1], [5]])
    snapshot = snapshot_create(name="s", campaigns=[campaign])
    (tmp_path / "model").mkdir()
    shutil.rmtree(registry_dir() / "run999999-rm-bad", ignore_errors=True)
    with pytest.raises(IntegrityError):  # the run row does not exist
        reward_model_register(
            run=Run(pk=999_999),
            name="rm-bad",
            snapshot=snapshot,
            config={"backbone": "x"},
            trained_dir=tmp_path / "model",
            metrics={},
            created_by=admin_user,
        )
    run = Run.objects.create(kind="reward_model", attempt=1)
    with pytest.raises(FileNotFoundError):  # the trained files are gone
        reward_model_register(
            run=run,
            name="rm-gone",
            snapshot=snapshot,
            config={"backbone": "x"},
            trained_dir=tmp_path / "missing",
            metrics={},
            created_by=admin_user,
        )
    assert not RewardModel.objects.exists()
    assert not (registry_dir() / "run999999-rm-bad").exists() and not (registry_dir() / f"run{run.pk}-rm-gone").exists()


def test_scoring_stores_each_comparisons_margin_and_rescoring_replaces_it(campaign_and_model):
    campaign, _, model = campaign_and_model
    assert comparisons_score(reward_model=model, campaign=campaign, scorer=LengthScorer()) == 4
    assert comparisons_score(reward_model=model, campaign=campaign, scorer=LengthScorer()) == 4
    assert ComparisonScore.objects.count() == 4
    for score in ComparisonScore.objects.select_related("comparison__trajectory_a", "comparison__trajectory_b"):
        c = score.comparison
        assert score.margin == score.score_a - score.score_b == len(c.trajectory_a.steps) - len(c.trajectory_b.steps)


class MarginScorer:
    def __init__(self, margins):
        self.margins = iter(margins)

    def score_episodes(self, items):
        out = []
        for _ in range(0, len(items), 2):
            out += [next(self.margins), 0.0]
        return out


def test_the_queue_orders_by_uncertainty(campaign_and_model):
    campaign, comparisons, model = campaign_and_model
    # Votes so far: A, B, A, B. Margins (A - B): strong A, strong A, close, strong B.
    comparisons_score(reward_model=model, campaign=campaign, scorer=MarginScorer([4.0, 3.0, 0.1, -5.0]))
    annotator = UserFactory(roles=["annotator"])

    campaign_order_by_uncertainty(campaign=campaign, reward_model=model, order="closest")
    assert assignment_next(campaign=campaign, annotator=annotator).comparison_id == comparisons[2].pk

    campaign_order_by_uncertainty(campaign=campaign, reward_model=model, order="disagree")
    priorities = {c.pk: c.priority for c in campaign.comparisons.all()}
    # Comparison 1 (votes lean B, the model says A) and 3 (votes lean B, model B: agrees) ...
    assert priorities[comparisons[1].pk] > 1 > priorities[comparisons[2].pk] > priorities[comparisons[0].pk]
    assert priorities[comparisons[3].pk] < 1

    campaign_order_by_uncertainty(campaign=campaign, reward_model=model, order="none")
    assert set(campaign.comparisons.values_list("priority", flat=True)) == {0.0}
    with pytest.raises(ArbiterError, match="order: one of"):
        campaign_order_by_uncertainty(campaign=campaign, reward_model=model, order="random")


def test_launch_checks_refuse_too_few_pairs_and_a_missing_current_model(admin_user, campaign_and_model):
    campaign, _, model = campaign_and_model
    assert "a reward model needs at least 16" in " ".join(snapshot_problems(model.snapshot_id))
    with pytest.raises(ArbiterError, match="at least 16"):
        run_launch(
            kind="reward_model",
            config={"snapshot_id": model.snapshot_id, "tokenizer_dir": tiny_policy().model_dir},
            user=admin_user,
        )
    with pytest.raises(ArbiterError, match="/nope holds no tokenizer"):
        run_launch(
            kind="reward_model", config={"snapshot_id": model.snapshot_id, "tokenizer_dir": "/nope"}, user=admin_user
        )
    with pytest.raises(ArbiterError, match="backbone: /no/such/model"):
        run_launch(
            kind="reward_model",
            config={"snapshot_id": model.snapshot_id, "backbone": "/no/such/model"},
            user=admin_user,
        )
    with pytest.raises(ArbiterError, match="learning_rate: must be positive"):
        run_launch(kind="reward_model", config={"snapshot_id": model.snapshot_id, "learning_rate": -1}, user=admin_user)
    with pytest.raises(ArbiterError, match="no current reward model"):
        run_launch(kind="reward_scoring", config={"campaign_id": campaign.pk}, user=admin_user)
    campaign_reward_model_set(campaign=campaign, reward_model=model, user=admin_user)
    run = run_launch(
        kind="reward_scoring", config={"campaign_id": campaign.pk, "order": "closest"}, user=admin_user, enqueue=False
    )
    assert {link["type"] for link in run.lineage} == {"reward model", "campaign"}


@pytest.mark.parametrize(
    "url,roles_ok",
    [
        ("/reward-models/", ("researcher", "admin")),
        ("/reward-models/{id}/", ("researcher", "admin")),
        ("/reward-models/{id}/campaigns/{campaign}/", ("admin",)),
    ],
)
def test_reward_model_pages_by_role(client, role_users, campaign_and_model, url, roles_ok):
    campaign, _, model = campaign_and_model
    url = url.format(id=model.pk, campaign=campaign.pk)
    assert client.get(url).status_code == 302
    for role, user in role_users.items():
        client.force_login(user)
        assert client.get(url).status_code == (200 if role in roles_ok else 403), (role, url)


def test_only_admins_choose_a_campaigns_current_model(client, role_users, campaign_and_model):
    campaign, _, model = campaign_and_model
    for role in ("annotator", "researcher"):
        client.force_login(role_users[role])
        assert client.post(f"/reward-models/{model.pk}/use", {"campaign": campaign.pk}).status_code == 403
    client.force_login(role_users["admin"])
    client.post(f"/reward-models/{model.pk}/use", {"campaign": campaign.pk})
    assert campaign.current_reward_model.reward_model == model


def test_the_evaluation_probes_answer_swaps_of_held_out_trajectories(client, admin_user, tmp_path):
    from rewardmodel.services import evaluate_reward_model
    from tests.rewardmodel.rm_fixtures import simulated_snapshot

    class PairLengthScorer(LengthScorer):
        def score_pairs(self, rows):
            return [float(len(r["chosen"])) for r in rows], [float(len(r["rejected"])) for r in rows]

    snapshot = simulated_snapshot(tasks=12, seed=3)
    metrics = evaluate_reward_model(scorer=PairLengthScorer(), snapshot=snapshot, eval_policy=None)
    swap = metrics["answer_swap"]
    assert swap["n"] > 0 and swap["accuracy"] == 0.5  # a scorer blind to the answer is at chance, ties and all
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    run = Run.objects.create(kind="reward_model", status="running", attempt=1, created_by=admin_user)
    model = reward_model_register(
        run=run,
        name="probed",
        snapshot=snapshot,
        config={"backbone": "policy-llama"},
        trained_dir=tmp_path / "model",
        metrics=metrics,
        created_by=admin_user,
    )
    client.force_login(admin_user)
    page = client.get(f"/reward-models/{model.pk}/").content.decode()
    assert 'id="answer-swap"' in page and f"Answer swap ({swap['n']})" in page and "50.0%" in page


@pytest.mark.parametrize(
    ("people", "simulated", "words"),
    [
        (True, False, "people's votes"),
        (False, True, "simulated annotators' votes"),
        (True, True, "people's and simulated annotators' votes"),
    ],
)
def test_a_reward_model_says_whose_votes_it_learned_from(people, simulated, words):
    """Simulated annotators' votes are never called people's (issue 53)."""
    from annotate.services.datasets import SnapshotFilters

    campaign = None
    if people:
        campaign = voted_campaign([[1, 1], [5, 5]])[0]
    if simulated:
        campaign = voted_campaign([[1, 1], [5, 4]], synthetic=True, campaign=campaign)[0]
    snapshot = snapshot_create(name="s", campaigns=[campaign], filters=SnapshotFilters(include_synthetic=True))
    model = RewardModel.objects.create(name="rm", snapshot=snapshot, backbone="tiny", model_dir="/nowhere")
    assert model.trained_on == words
