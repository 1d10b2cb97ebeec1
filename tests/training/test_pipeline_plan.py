"""A small environment gets a plan checked before any stage starts (issue 29): the defaults
scaled to its size and said, everything a stage would refuse refused up front."""

import json

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Policy
from tests.helpers import Catalog
from tests.rewardmodel.rm_fixtures import tiny_policy
from training.pipeline import PipelineConfig, pipeline_plan, pipeline_problems
from webapp.models import Run

pytestmark = [pytest.mark.django_db]


class OldStyleDemonstrator(Catalog):
    def demonstrator(self):  # no seed: what the docs did not say
        return lambda task, state: None


@pytest.fixture
def small(settings):
    """The arithmetic environment at 30 tasks: 21 train, 3 dev, 6 eval."""
    settings.ARBITER_ENVIRONMENTS = {
        "arith30": {"class": "arithmetic", "options": {"n_tasks": 30}},
        "arith8": {"class": "arithmetic", "options": {"n_tasks": 8}},
    }
    settings.ARBITER_ENVIRONMENT_MODULES = ["tests.training.test_pipeline_plan", "tests.helpers"]
    return "arith30"


def test_the_defaults_are_scaled_to_a_small_environment_and_said(small):
    planned, notes = pipeline_plan(PipelineConfig(environment=small))
    assert planned.rollout_tasks == 21 and planned.samples_per_task == 5  # 21 x 10 pairs: at least 150 aimed at
    assert planned.ppo == {"episodes_per_iteration": 21}  # the minibatch (16) fits
    assert any(n.startswith("samples_per_task: 5 episodes on each of 21") for n in notes)
    assert any("episodes_per_iteration: 21 (21 training tasks, one episode each" in n for n in notes)
    # 20 other worlds of 30 tasks would be 621 demonstrations, memorised; 62 (the most) give 1,881
    assert planned.bc_extra_worlds == 62
    assert any(n.startswith("bc_extra_worlds: 62 other worlds of 30 tasks, 1881 demonstrations") for n in notes)
    assert pipeline_problems(planned) == []
    # Issue 45: a small environment's plan says its test split is sized to the labels.
    assert any(n.startswith("test split: arith30 has 21 training tasks") for n in notes)
    grpo, notes = pipeline_plan(PipelineConfig(environment=small, rl_kind="grpo"))
    assert "episodes_per_iteration" not in grpo.ppo and pipeline_problems(grpo) == []  # 64 = 16 tasks x 4: they fit
    large, notes = pipeline_plan(PipelineConfig(environment="arithmetic"))  # 280 training tasks: the defaults
    assert large.samples_per_task == 2 and large.ppo == {} and not [n for n in notes if "episodes_per" in n]
    assert not [n for n in notes if n.startswith("test split")]
    assert large.bc_extra_worlds == 20  # 280 + 20 x 400 demonstrations: the default
    started, notes = pipeline_plan(PipelineConfig(environment=small, policy_id=5))
    assert started.bc_extra_worlds == 0 and not [n for n in notes if n.startswith("bc_")]
    unseeded, notes = pipeline_plan(PipelineConfig(environment="tests.helpers:Catalog"))
    assert unseeded.bc_extra_worlds == 0 and any("catalog is not built per seed" in n.lower() for n in notes)


def test_what_a_user_chose_is_kept_and_checked_before_anything_runs(small):
    planned, _ = pipeline_plan(
        PipelineConfig(environment=small, samples_per_task=2, ppo={"episodes_per_iteration": 64})
    )
    assert planned.samples_per_task == 2
    assert pipeline_problems(planned) == [
        "PPO settings: episodes_per_iteration: 64 needs 64 training tasks (each episode of a batch plays a different "
        "task), and there are 21; at most 21."
    ]
    # GRPO and RLOO play group_size episodes of each task: 64 need 16 tasks, which 21 give
    rloo, _ = pipeline_plan(PipelineConfig(environment=small, rl_kind="rloo", ppo={"episodes_per_iteration": 64}))
    assert pipeline_problems(rloo) == []
    too_small, _ = pipeline_plan(PipelineConfig(environment="arith8"))
    refused = pipeline_problems(too_small)  # 7 train, 1 dev, 0 eval tasks
    assert any(p.startswith("rollout_tasks: arith8 gives 7 training tasks") for p in refused)
    assert "eval_environment: arith8 has no eval tasks to evaluate on." in refused


def test_an_environment_without_a_demonstrator_is_refused_before_behaviour_cloning(small):
    with pytest.raises(CommandError) as caught:
        call_command("run_pipeline", "--environment", "tests.helpers:Catalog")
    assert "Nothing was started" in str(caught.value) and "has no scripted demonstrator" in str(caught.value)
    assert "Give --policy-id" in str(caught.value)
    with pytest.raises(
        CommandError,
        match=r"demonstrator cannot be called with seed= and mistakes= .*"
        r"def demonstrator\(self, \*, seed=0, \*\*options\)",
    ):
        call_command("run_pipeline", "--environment", "tests.training.test_pipeline_plan:OldStyleDemonstrator")
    assert not Run.objects.exists() and not Policy.objects.exists()


def test_a_missing_policy_or_base_policy_is_refused_up_front(small):
    with pytest.raises(CommandError, match="policy_id: No policy with id 999"):
        call_command("run_pipeline", "--environment", small, "--policy-id", "999")
    with pytest.raises(CommandError, match="bc_base_policy_id: No policy with id 998"):
        call_command("run_pipeline", "--environment", small, "--bc-base-policy-id", "998")
    with pytest.raises(CommandError, match="max_action_tokens: between 1 and 8,192; got 100,000"):
        call_command(
            "run_pipeline",
            "--environment",
            small,
            "--policy-id",
            str(tiny_policy().pk),
            "--max-action-tokens",
            "100000",
            "--ppo",
            json.dumps({}),
        )


def test_a_round_whose_rollouts_repeat_themselves_says_why_it_cannot_train():
    from training.loop.rounds import too_few_comparisons

    said = too_few_comparisons(
        {"comparisons": 1, "trajectories": 21, "duplicates": 84, "success": 1.0}, "loop30 round 1", PipelineConfig()
    )
    assert said.startswith("The rollouts of loop30 round 1 built 1 comparisons, and a reward model needs at least 10.")
    assert "Of its 105 episodes 84 repeated an episode already stored" in said and "100% of them correct" in said
    assert too_few_comparisons({"comparisons": 10}, "r", PipelineConfig()) is None


def test_settings_of_the_wrong_type_are_refused_not_crashed_on(small):
    planned, _ = pipeline_plan(
        PipelineConfig(environment=small, rl_kind="grpo", ppo={"group_size": "four", "minibatch_size": None})
    )
    assert any(p.startswith("GRPO settings:") for p in pipeline_problems(planned))
    # Decoded by the one strict reader (issue 46): NaN and 1e400 are refused, not read as floats.
    for bad in ("[1]", "3", '"text"', '{"learning_rate": NaN}', '{"learning_rate": 1e400}', "{not json"):
        with pytest.raises(CommandError, match="ppo: takes a JSON object"):
            call_command("run_pipeline", "--environment", small, "--ppo", bad)


def test_a_demonstrator_that_fails_is_named_with_its_error():
    from tests.helpers import Catalog
    from training.envs.base import demonstrator_problem

    class Broken(Catalog):
        def demonstrator(self, *, seed=0, **options):
            raise KeyError("no scripts for this catalog")

    assert demonstrator_problem(Broken()) == "catalog.demonstrator failed: KeyError: 'no scripts for this catalog'"


def test_the_loops_test_split_is_sized_to_the_labels(small):
    """Issue 45: where a fifth of the tasks holds too few pairs that are not ties to measure a
    reward model on, the loop's dataset takes a larger test split (up to half), and says so. The
    tasks are chosen by the split's own hash: those a fifth would test on are all ties, those a
    split of 30% adds are decided, and enough decided ones stay in training."""
    from dataclasses import replace as copy

    from annotate.models import Comparison, DatasetSnapshot
    from annotate.preferences import task_split
    from annotate.services.assignments import Verdict, assignment_next, judgement_submit
    from rewardmodel.services import snapshot_problems
    from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
    from training.loop.rounds import _snapshot
    from training.models import LoopRound

    seed = 3

    def band(external_id: str) -> str:
        if task_split(external_id, seed=seed, test_fraction=0.2) == "test":
            return "fifth"
        if task_split(external_id, seed=seed, test_fraction=0.3) == "test":
            return "added"
        return "train" if task_split(external_id, seed=seed, test_fraction=0.5) == "train" else "between"

    wanted = {"fifth": 2, "added": 2, "train": 7}
    chosen = {name: [] for name in wanted}
    n = 0
    while any(len(chosen[k]) < v for k, v in wanted.items()):
        external_id, n = f"sized-{n}", n + 1
        where = band(external_id)
        if where in chosen and len(chosen[where]) < wanted[where]:
            chosen[where].append(external_id)
    campaign = CampaignFactory(votes_per_comparison=1)
    tied = set()
    for where, ids in chosen.items():
        for external_id in ids:
            task = TaskFactory(external_id=external_id)
            if where == "fifth":
                tied.add(task.pk)
            for _ in range(3):
                a, b = TrajectoryFactory(task=task), TrajectoryFactory(task=task)
                Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    person = UserFactory(roles=["annotator"])
    while (a := assignment_next(campaign=campaign, annotator=person)) is not None:
        choice = 3 if a.comparison.task_id in tied else 1
        judgement_submit(assignment_id=a.id, annotator=person, verdict=Verdict(choice=choice))
    start = Policy.objects.create(name="start")
    loop_round = LoopRound.objects.create(
        loop="sized", number=1, campaign=campaign, start_policy=start, reference_policy=start
    )
    lines = []
    snapshot = _snapshot(loop_round, copy(PipelineConfig(environment=small), seed=seed), person, log=lines.append)
    assert snapshot.test_fraction == 0.3 and snapshot_problems(snapshot.pk) == []
    assert DatasetSnapshot.objects.count() == 1  # the fifth that was tried was removed
    assert lines == [
        "The dataset's test split is 30% of the tasks, not a fifth: a fifth held too few pairs that are not ties to "
        "measure the reward model on; this one holds 12 test pairs, 6 of them ties."
    ]


def test_behaviour_cloning_steps_are_scaled_to_the_demonstrations():
    """Issue 45: 18 demonstrations get 45 steps (40 passes of batch 16), not 1,500; the default's
    2,000 demonstrations keep the default schedule."""
    from training.policy.bc_config import BCConfig, steps_for_data

    scaled, note = steps_for_data(BCConfig(), 18)
    assert (scaled.max_steps, scaled.warmup_steps, scaled.extend_steps) == (45, 4, 0)
    assert note.startswith("18 demonstrations: 45 steps (40 passes of batch 16; max_steps 1500 would be 1333 passes)")
    same, note = steps_for_data(BCConfig(), 2000)
    assert same == BCConfig() and note == ""
    capped, _ = steps_for_data(BCConfig(), 1000)  # 2,500 steps in all: the extension is what is cut
    assert (capped.max_steps, capped.extend_steps) == (1500, 1000)
    capped, _ = steps_for_data(BCConfig(), 800)
    assert (capped.max_steps, capped.extend_steps) == (1500, 500)
    assert steps_for_data(BCConfig(max_epochs=0), 18)[0].max_steps == 1500  # 0: no cap
